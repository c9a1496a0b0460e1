"""MkDocs hook: the configuration reference page, generated from the config schema at build time.

The page reference/configuration.md exists only in the built site: it is rendered by
augsbert.config.reference.render() from the schema the package ships, so there is no copy to keep
in step. A schema key without a description makes render() raise, which stops the build.
"""

from __future__ import annotations

from mkdocs.structure.files import File

from augsbert.config.reference import render

PAGE = "reference/configuration.md"


def on_files(files, config):
    if files.get_file_from_path(PAGE) is not None:
        raise ValueError(f"docs/{PAGE} is generated from the schema at build time; delete the file in docs/")
    files.append(File.generated(config, PAGE, content=render()))
    return files
