"""mkdocs hook: links from a page to files of the repository outside docs/.

A relative link that leaves docs/ (``../notebooks/01_quickstart.ipynb``) is checked against
the repository: a missing file is a warning (so ``mkdocs build --strict`` fails on it, as on
any broken link). An existing one becomes a link to the repository (``repo_url``) or, with
no ``repo_url`` configured, its text alone.
"""

import logging
import posixpath
import re
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.ckpt_jax_links")

LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def on_page_markdown(markdown, page, config, files):
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def replace(match):
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:|^#|^/", target):
            return match.group(0)
        path = target.split("#", 1)[0]
        resolved = Path(posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), path)))
        if not str(resolved).startswith(".."):
            return match.group(0)  # inside docs/: mkdocs validates it
        in_repo = (docs / resolved).resolve()
        if root not in in_repo.parents and in_repo != root:
            log.warning("%s: link %r leaves the repository", page.file.src_uri, target)
            return match.group(0)
        if not in_repo.exists():
            log.warning("%s: link %r names a file the repository does not have", page.file.src_uri, target)
            return match.group(0)
        if repo_url:
            return f"[{text}]({repo_url}/blob/main/{in_repo.relative_to(root).as_posix()})"
        return text

    return LINK.sub(replace, markdown)
