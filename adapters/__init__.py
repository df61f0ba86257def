"""Chat platforms: platform events in, neutral events out, and back."""
