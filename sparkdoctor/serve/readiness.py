"""Is the server ready? GET its readiness path (default /health), else /v1/models: the first answer 200
means ready. Standard library only: it runs every half second while a server starts and must not need
the bench's HTTP client."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request

FALLBACK = "/v1/models"


def status_of(url: str, timeout: float) -> int | None:
    """The HTTP status of GET url, or None when nothing answered (refused, reset, timed out)."""
    request = urllib.request.Request(url, headers={"User-Agent": "sparkdoctor-readiness"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return None


def ready(base_url: str, path: str, timeout: float = 2.0) -> str | None:
    """The path that answered 200 (the recipe's, else /v1/models), or None when the server is not ready."""
    for candidate in dict.fromkeys((path, FALLBACK)):
        status = status_of(base_url + candidate, timeout)
        if status == 200:
            return candidate
        if status is None:
            return None  # nothing listens yet: the fallback would not answer either
    return None
