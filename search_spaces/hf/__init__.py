"""Open language models by name, ``--model hf:<name>[,method=lora,...]`` (issue #48): their
architecture figures (``known``), the reference and its options (``ref``), the method
(``methods``: full, LoRA, QLoRA, frozen blocks) and the builder (``build``). Frameworks are
imported inside the functions."""

from advisor.search_spaces.hf.ref import METHODS, PREFIX, HfRef, is_hf, parse

__all__ = ["METHODS", "PREFIX", "HfRef", "builder", "is_hf", "parse"]


def builder(model: str) -> object:
    """The builder of the ``hf:`` reference ``model``: ``build`` with the model bound."""
    import functools

    from advisor.search_spaces.hf.build import build

    return functools.partial(build, model)
