"""Exit 0 when the given PostgreSQL and Redis URLs answer; used by `make test-pg`."""

import socket
import sys
from urllib.parse import urlparse


def reachable(url: str, default_port: int) -> bool:
    parts = urlparse(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    pg_url, redis_url = sys.argv[1:3]
    sys.exit(0 if reachable(pg_url, 5432) and reachable(redis_url, 6379) else 1)
