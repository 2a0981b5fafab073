"""Progress bars: tqdm's notebook widget where ipywidgets is installed, else its text bar.

`tqdm.auto` picks the widget in any Jupyter kernel and, without ipywidgets, warns
("IProgress not found") and prints text chunks into the cell; this never does.
"""

from __future__ import annotations

__all__ = ["LONG_RUN", "progress_bar"]

# Runs of at least this many firings (fleets x jobs x cycles; to a horizon, about half the
# events expected) show a progress bar unless told otherwise.
LONG_RUN = 5_000_000


def progress_bar(**kwargs):
    """A tqdm bar (imported only when a bar is shown)."""
    try:
        import ipywidgets  # noqa: F401  (the widget bar needs it)
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm.std import tqdm
    return tqdm(**kwargs)
