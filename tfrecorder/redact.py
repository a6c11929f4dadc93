"""Redact (pure): credentials in URLs - user:password@ and token/signature query values - before they are shown.

Image URIs reach errors.csv, dataset.json, the records' ``image_uri`` feature, logs and error
messages only through ``redact``; the unredacted URL is used only to fetch the image.
"""

from __future__ import annotations

import re

REDACTED = "REDACTED"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s?#]+@")
_SECRET_PARAMS = (
    "x-goog-signature", "x-goog-credential", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    "signature", "sig", "token", "access_token", "id_token", "refresh_token", "auth", "authorization", "key",
    "api_key", "apikey", "password", "passwd", "pwd", "secret", "client_secret", "credential", "code",
)
_SECRETS = re.compile(rf"(?i)([?&;](?:{'|'.join(map(re.escape, _SECRET_PARAMS))})=)[^&#\s'\"]*")


def redact(text: str) -> str:
    """``text`` with URL passwords/user names and secret query values replaced by REDACTED.

    Examples:
        >>> from tfrecorder.redact import redact
        >>> redact("https://me:pw@host/a.jpg?X-Goog-Signature=abc&size=2")
        'https://REDACTED@host/a.jpg?X-Goog-Signature=REDACTED&size=2'
    """
    if not text or ("@" not in text and "=" not in text):
        return text
    return _SECRETS.sub(rf"\1{REDACTED}", _USERINFO.sub(rf"\1{REDACTED}@", text))
