"""What ``--model`` names: a built-in workload (``fcn``), a user's builder
(``package.module:function``) or an open model (``hf:meta-llama/Llama-3.1-8B,method=lora``,
``advisor.search_spaces.hf``), told apart once, where the name enters."""

from __future__ import annotations

import re

from advisor.errors import AdvisorError

_USER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_BUILTIN = re.compile(r"^[A-Za-z0-9][\w.-]*$")


class ModelRef(str):
    """A model reference, checked on construction. A ``str`` (stored, compared and printed as
    the user wrote it) that knows which kind it is: ``is_user`` with its ``module`` and
    ``function``, else a built-in workload's name."""

    __slots__ = ()

    def __new__(cls, text: str) -> ModelRef:
        if isinstance(text, ModelRef):
            return text
        text = str(text)
        if text.startswith("hf:"):  # issue #48: an open model by name or config.json
            from advisor.search_spaces.hf import parse

            parse(text)
            return super().__new__(cls, text)
        if ":" in text and not _USER.match(text):
            raise AdvisorError(
                f"{text!r} is not a user model: write it as package.module:function.",
                "give your builder as package.module:function, or a built-in workload "
                "(see `advisor workloads`).",
            )
        if ":" not in text and not _BUILTIN.match(text):
            raise AdvisorError(
                f"{text!r} is not a workload name (see `advisor workloads`).",
                "give a built-in workload's name, or your builder as package.module:function.",
            )
        return super().__new__(cls, text)

    @property
    def is_user(self) -> bool:
        """Whether this names a user's builder (``module:function``, or an ``hf:`` model, whose
        builder imports transformers), not a built-in workload."""
        return ":" in self

    @property
    def is_hf(self) -> bool:
        """Whether this names an open model, ``hf:<name or config.json>[,options]``."""
        return self.startswith("hf:")

    @property
    def module(self) -> str:
        return self.partition(":")[0] if self.is_user and not self.is_hf else ""

    @property
    def function(self) -> str:
        return "" if self.is_hf else self.partition(":")[2]
