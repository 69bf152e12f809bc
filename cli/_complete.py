"""Shell completion of model names, asked of the server (quickly, silently)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

__all__ = ["complete_model"]


def complete_model(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Model names from the server's repository index that start with ``incomplete``."""
    from ._settings import Settings

    root = ctx.find_root().params
    try:
        settings = Settings.from_options(
            url=root.get("url") or "localhost:8000",
            ssl=bool(root.get("ssl")),
            insecure=bool(root.get("insecure")),
            ca_certs=root.get("ca_certs"),
            timeout=1.0,
        )
        with settings.client(timeout=1.0) as client:
            index = client.get_model_repository_index()
    except Exception:  # completion must never fail loudly
        return []
    names = sorted({str(m.get("name", "")) for m in index})
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]
