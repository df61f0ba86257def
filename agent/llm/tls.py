"""One TLS context per process for the model clients.

Building a context reads the whole CA bundle (70–270 ms of CPU on these machines), and each
SDK client would build its own: every model client, and so every process start and every
test that builds a model, paid it again. The context is the one httpx builds by default
(`SSL_CERT_FILE` / `SSL_CERT_DIR`, else certifi), made once and shared.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
