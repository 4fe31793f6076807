"""Stand-in for `datasets` (tests/unit/scale_out_doc.test.ts): the one call docs/scale-out.md makes."""


class Dataset:
    def __init__(self, rows):
        self.rows = list(rows)

    @classmethod
    def from_list(cls, rows):
        return cls(rows)

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)
