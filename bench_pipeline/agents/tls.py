"""One TLS context per process for the agents' and judges' HTTP clients.

Building a verifying `ssl.SSLContext` loads the whole CA bundle: ~50-80 ms, which a client
built per trial paid every time (most of a text case's cost against a fast endpoint). A
context is safe to share between clients and threads; it is built on first use, the way
httpx builds its own (the certifi bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set).
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    import httpx

    return httpx.create_ssl_context()
