"""Schedules: the store, the clock that starts each due slot once, `/schedules`, what a slot's
run checks first, and the console's share."""
