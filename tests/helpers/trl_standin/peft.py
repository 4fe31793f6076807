"""Stand-in for `peft` (tests/unit/scale_out_doc.test.ts): LoraConfig keeps its arguments."""


class LoraConfig:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
