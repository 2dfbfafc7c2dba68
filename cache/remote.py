"""Object storage for the store (storage.py): opening a URL with fsspec, and what the server
answers about access as one-line UserErrors: an unknown bucket, refused or missing credentials,
an endpoint out of reach. Never a traceback, never a credential (every message goes through
`redact`, which hides the values of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and the
userinfo of a URL)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fsspec

from ..common.errors import UserError
from ..common.redaction import redact


def is_url(location: str | Path) -> bool:
    return "://" in str(location) and not str(location).startswith("file://")


def filesystem_options(protocol: str) -> dict[str, Any]:
    """Options for an object-storage filesystem: listings never cached (other processes write
    the same store), the region from AWS_REGION (botocore reads only AWS_DEFAULT_REGION)."""
    if protocol not in ("s3", "s3a"):
        return {}
    options: dict[str, Any] = {"use_listings_cache": False}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["client_kwargs"] = {"region_name": region}
    return options


def open_filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of a store URL (fsspec caches one instance per options)."""
    protocol = url.split("://", 1)[0]
    # At DEBUG, botocore logs every request's headers, whose Authorization names the access key
    # id: its request log stays at INFO unless someone set that logger's level on purpose.
    requests_log = logging.getLogger("botocore.endpoint")
    if requests_log.level == logging.NOTSET:
        requests_log.setLevel(logging.INFO)
    try:
        return fsspec.core.url_to_fs(url, **filesystem_options(protocol))
    except (ImportError, ValueError) as exc:
        raise UserError(f"store {url}: cannot open this kind of storage ({exc})") from None



def s3_code(exc: BaseException) -> str:
    """The S3 error code (or HTTP status) behind an exception s3fs translated, else ''."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    response = getattr(cause, "response", None) or {}
    code = str((response.get("Error") or {}).get("Code") or "")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code or str(status or "")


def problem(exc: BaseException, url: str) -> str | None:
    """The one line that says what is wrong with access to the store at `url`, or None for an
    error that is not about access."""
    import botocore.exceptions as boto

    where = f"store {url}"
    if isinstance(exc, boto.NoCredentialsError):
        return (f"{where}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(and AWS_ENDPOINT_URL for a server other than AWS)")
    if isinstance(exc, PermissionError) or s3_code(exc) in ("403", "AccessDenied"):
        return (f"{where}: the server refused the credentials of AWS_ACCESS_KEY_ID / "
                f"AWS_SECRET_ACCESS_KEY ({redact(str(exc)) or 'access denied'})")
    if isinstance(exc, (boto.EndpointConnectionError, boto.ConnectionError)):
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or "the default AWS endpoint"
        return f"{where}: cannot reach {redact(endpoint)} (AWS_ENDPOINT_URL): {redact(str(exc))}"
    if isinstance(exc, boto.BotoCoreError):
        return f"{where}: {redact(str(exc))}"
    return None


def check_bucket(fs: Any, url: str) -> None:
    """The bucket exists and the credentials are accepted (one HeadBucket), else a UserError.
    Only S3 is checked; other fsspec storage reports its own errors."""
    if not hasattr(fs, "call_s3"):
        return
    bucket = urlsplit(url).netloc
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        raise UserError(f"store {url}: bucket {bucket} does not exist (create it, or check "
                        "AWS_ENDPOINT_URL)") from None
    except Exception as exc:
        raise UserError(problem(exc, url) or f"store {url}: {redact(str(exc))}") from None
