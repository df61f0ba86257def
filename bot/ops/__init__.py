"""Operations: logging, metrics, health, the HTTP listeners, `parley doctor`, the embedded Redis
server and garbage-collection tuning."""
