"""Label the bibliography the way the text cites: "Vaswani et al., 2017".

The text cites author-year (``bibtex_reference_style: author_year``), but
pybtex's styles label the list of references alphabetically ("[VSP+17]"), so
a reader could not match a citation with its entry. This extension registers
a pybtex style, ``authoryear``, whose labels are the same author-year
strings; ``_config.yml`` selects it with ``bibtex_default_style``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx


def _surname(person: Any) -> str:
    # Braces protect case in BibTeX ("{GPTs}"); they are not part of a name.
    return " ".join(person.last_names).replace("{", "").replace("}", "")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels such as "Raschka, 2024", "Milakov and Gimelshein, 2018" and
    "Dao et al., 2022"."""

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        for entry in sorted_entries:
            people = (
                entry.persons.get("author")
                or entry.persons.get("editor")
                or []
            )
            if not people:
                names = entry.fields.get("organization", entry.key)
            elif len(people) == 1:
                names = _surname(people[0])
            elif len(people) == 2:
                names = f"{_surname(people[0])} and {_surname(people[1])}"
            else:
                names = f"{_surname(people[0])} et al."
            yield f"{names}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearStyle(UnsrtStyle):
    """pybtex's ``unsrt`` entries, sorted by author and year, labelled by
    author and year."""

    default_label_style = AuthorYearLabelStyle
    default_sorting_style = "author_year_title"


def setup(app: Sphinx) -> dict[str, Any]:
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
