"""Link the student edition: its zip when the build has it, and each chapter's
student notebook in Colab and Binder.

The student edition (``make student``) is every chapter with its solutions
replaced by stubs. The publishing workflow pushes its notebooks to the
branch ``student_edition_branch`` of the repository set in ``_config.yml``,
where Colab and Binder open them straight from GitHub. This extension

- adds an "Open the exercises in Colab" and a Binder link to the
  Exercises section of every chapter (a notebook page), so that the chapter
  notebooks themselves carry no link that would also show in Jupyter;
- provides ``{student-edition-zip}``, which links the zip when
  ``_build/student`` holds it (and copies it to the site's root) and
  otherwise says how to build it, so that ``jupyter-book build .`` works on
  a fresh clone;
- provides ``{student-notebooks}``, a list of every chapter with its two
  links, for the instructors' page.

The URLs are built from ``repository.url`` and ``launch_buttons`` of
``_config.yml``, which Jupyter Book passes on as ``html_theme_options``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective

EXERCISES_TITLE = "Exercises"
DEFAULT_ZIP = "_build/student/attention-from-scratch-student.zip"


def _theme_option(app: Sphinx, name: str, default: Any = None) -> Any:
    return (app.config.html_theme_options or {}).get(name, default)


def student_urls(app: Sphinx, notebook: str) -> tuple[str, str]:
    """The Colab and Binder URLs of one student notebook (a file name such as
    ``01_simplified_attention.ipynb``, at the root of the student branch)."""
    repository = _theme_option(app, "repository_url", "").rstrip("/")
    prefix = "https://github.com/"
    if not repository.startswith(prefix):
        raise ValueError(
            f"repository.url: expected a GitHub URL, got {repository!r}"
        )
    owner_name = repository[len(prefix) :]
    branch = app.config.student_edition_branch
    launch = _theme_option(app, "launch_buttons", {}) or {}
    colab = launch.get(
        "colab_url", "https://colab.research.google.com"
    ).rstrip("/")
    binder = launch.get("binderhub_url", "https://mybinder.org").rstrip("/")
    return (
        f"{colab}/github/{owner_name}/blob/{branch}/{notebook}",
        f"{binder}/v2/gh/{owner_name}/{branch}?urlpath=tree/{notebook}",
    )


def _link(text: str, url: str) -> nodes.reference:
    return nodes.reference(
        text, text, refuri=url, classes=["student-edition-link"]
    )


def _is_chapter(env: BuildEnvironment, docname: str) -> bool:
    return str(env.doc2path(docname)).endswith(".ipynb")


def _notebook_name(docname: str) -> str:
    return docname.rsplit("/", 1)[-1] + ".ipynb"


def _zip_path(app: Sphinx) -> Path:
    return Path(app.confdir) / app.config.student_edition_zip


class ExerciseLinks(SphinxTransform):
    """Put the Colab and Binder links of a chapter's student notebook under
    the title of its Exercises section."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        if not _is_chapter(self.env, self.env.docname):
            return
        for section in self.document.findall(nodes.section):
            title = section.next_node(nodes.title)
            if title is None or title.astext().strip() != EXERCISES_TITLE:
                continue
            colab, binder = student_urls(
                self.app, _notebook_name(self.env.docname)
            )
            paragraph = nodes.paragraph(classes=["student-edition-links"])
            paragraph += [
                _link("Open the exercises in Colab", colab),
                nodes.Text(" or "),
                _link("on Binder", binder),
                nodes.Text(
                    ": the student edition of this chapter, with a stub "
                    "in place of each solution and a cell that checks your "
                    "answer."
                ),
            ]
            section.insert(section.index(title) + 1, paragraph)
            return


class StudentEditionZip(SphinxDirective):
    """The zip's download link, or how to build the student edition."""

    def run(self) -> list[nodes.Node]:
        zip_path = _zip_path(self.env.app)
        self.env.note_dependency(str(zip_path))
        paragraph = nodes.paragraph()
        if zip_path.is_file():
            depth = self.env.docname.count("/")
            paragraph += _link(
                "Download the student edition (zip)",
                "../" * depth + zip_path.name,
            )
            paragraph += nodes.Text(
                ", or build it from a clone of the repository:"
            )
        else:
            paragraph += nodes.Text(
                "This build of the book does not include the student "
                "edition's zip; build the student edition from a clone of "
                "the repository:"
            )
        return [paragraph]


class StudentNotebooksNode(nodes.General, nodes.Element):
    """Where the list of chapters goes; filled once every chapter is read."""


class StudentNotebooks(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        return [StudentNotebooksNode()]


def fill_student_notebooks(
    app: Sphinx, doctree: nodes.document, docname: str
) -> None:
    env = app.env
    chapters = sorted(
        name for name in env.found_docs if _is_chapter(env, name)
    )
    for placeholder in list(doctree.findall(StudentNotebooksNode)):
        items = nodes.bullet_list()
        for chapter in chapters:
            colab, binder = student_urls(app, _notebook_name(chapter))
            title = (
                env.titles[chapter].astext()
                if chapter in env.titles
                else chapter
            )
            paragraph = nodes.paragraph()
            paragraph += nodes.reference(
                title,
                title,
                refuri=app.builder.get_relative_uri(docname, chapter),
            )
            paragraph += [
                nodes.Text(": "),
                _link("Colab", colab),
                nodes.Text(", "),
                _link("Binder", binder),
            ]
            items += nodes.list_item("", paragraph)
        placeholder.replace_self(items)


def copy_zip(app: Sphinx, exception: Exception | None) -> None:
    zip_path = _zip_path(app)
    if (
        exception is None
        and app.builder.format == "html"
        and zip_path.is_file()
    ):
        shutil.copy2(zip_path, Path(app.outdir) / zip_path.name)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value(
        "student_edition_branch", "student-edition", "env", [str]
    )
    app.add_config_value("student_edition_zip", DEFAULT_ZIP, "env", [str])
    app.add_transform(ExerciseLinks)
    app.add_directive("student-edition-zip", StudentEditionZip)
    app.add_directive("student-notebooks", StudentNotebooks)
    app.add_node(StudentNotebooksNode)
    app.connect("doctree-resolved", fill_student_notebooks)
    app.connect("build-finished", copy_zip)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
