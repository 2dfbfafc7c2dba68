"""Checks made before any paid call: the model takes what the suite shows, and every role can
reach its provider (a key is set, or its endpoint answers). Each failure is one UserError."""

from __future__ import annotations

import os
import urllib.error

from ..common.errors import UserError
from ..config.endpoints import ListingRefused, endpoint_url, models_listing, served_name
from ..config.settings import ModelRole
from ..providers.chat import api_key_for
from ..providers.provider_errors import KEY_REJECTED


def check_vision(role: ModelRole) -> None:
    """A suite that sends images runs only on a model known to take them: declared by the user
    (--eval-vision, a sweep entry's vision = true) or so marked in litellm's model map. A model
    on the user's own endpoint is unknown to the map: a text-only server (llama-cpp-python's)
    would take the image parts and paste them into the prompt as text, and be scored on pictures
    it never saw."""
    if role.vision:
        return
    import litellm

    try:
        info = litellm.get_model_info(role.model)
    except Exception:  # litellm raises assorted types for models its map does not know
        raise UserError(
            f"model under test {role.model}: this suite shows images, and nothing says the "
            "model takes them (litellm's model map does not know it): pass --eval-vision (a "
            "sweep entry: vision = true) if it does") from None
    if not info.get("supports_vision"):
        raise UserError(f"model under test {role.model} does not take images, as litellm's "
                        "model map says; this suite shows images: choose a vision model (or "
                        "--eval-vision if the map is wrong)")


def check_access(role: ModelRole, label: str, allow_unlisted: bool = False) -> None:
    """A key exists for the provider, or the endpoint answers; an endpoint that lists its
    models lists this one (unless `allow_unlisted`: a router serving names it does not list);
    else one clear UserError."""
    if role.api_base:
        try:
            listing = models_listing(endpoint_url(role.api_base, "/models"), api_key_for(role))
        except ValueError:
            pass  # it answered, with something else than a listing
        except urllib.error.HTTPError as exc:
            sentence = exc.sentence if isinstance(exc, ListingRefused) else str(exc.reason)
            if exc.code in (401, 403) or KEY_REJECTED.search(sentence):
                raise UserError(f"{label} endpoint {role.endpoint} rejected the API key "
                                f"(HTTP {exc.code}: {sentence})") from None
            # Any other answer proves the endpoint is up (some servers lack /models).
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ConnectionRefusedError):
                raise UserError(f"{label} endpoint {role.endpoint} refused the connection: is "
                                "its server running, on that port?") from None
            raise UserError(f"{label} endpoint {role.endpoint} does not answer ({reason})") \
                from None
        else:
            _check_listed(role, label, [entry_id for entry_id, _ in listing], allow_unlisted)
    if role.api_key_env:
        if not os.environ.get(role.api_key_env):
            raise UserError(f"{label} {role.model}: environment variable {role.api_key_env} "
                            "is not set")
    elif not (role.api_base and role.model.startswith("openai/")):
        _require_provider_key(role, label)


def _require_provider_key(role: ModelRole, label: str) -> None:
    """The provider's usual key variables, as litellm knows them, are set."""
    import litellm

    try:
        found = litellm.validate_environment(model=role.model)
    except Exception as exc:  # litellm raises assorted types for unknown providers
        raise UserError(f"{label} {role.model}: litellm does not know this model ({exc})") \
            from None
    if not found.get("keys_in_environment", False):
        missing = ", ".join(found.get("missing_keys") or ["an API key"])
        raise UserError(f"{label} {role.model} needs {missing} in the environment "
                        f"(or --{'eval' if label.startswith('model') else 'judge'}-api-key-env)")


def _check_listed(role: ModelRole, label: str, listed: list[str], allow_unlisted: bool) -> None:
    """An endpoint that lists models is asked only for one it lists: asked for another, a
    server answers every request with an error (a gateway's 400 "Invalid model name")."""
    if not listed or allow_unlisted or served_name(role.model) in listed:
        return
    shown = ", ".join(listed[:10]) + (f" and {len(listed) - 10} more" if len(listed) > 10
                                      else "")
    raise UserError(f"{label} {role.model}: endpoint {role.endpoint} does not list "
                    f"{served_name(role.model)!r} among its models ({shown}): name one of "
                    "them, or pass --allow-unlisted-models (a sweep file: "
                    "allow_unlisted_models = true) for a router that serves names it does "
                    "not list")
