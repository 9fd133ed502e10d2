"""`replace`, `to_dict` and `from_dict` for the frozen config dataclasses of every floor."""

import dataclasses


class ConfigMethods:
    """`replace`, `to_dict` and `from_dict` of the frozen config dataclasses."""

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(
                f"Unknown {cls.__name__} fields {unknown}; expected some of {sorted(names)}"
            )
        return cls(**values)
