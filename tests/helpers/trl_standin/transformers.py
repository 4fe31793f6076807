"""Stand-in for `transformers` (tests/unit/scale_out_doc.test.ts): the callback base class."""


class TrainerCallback:
    pass
