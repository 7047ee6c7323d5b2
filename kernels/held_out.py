"""A model's check on the rows it was not fitted to (`HeldOut`), declared once in each topic's model.py and run for
every topic by the scaffold (kernels.topic) and kernels.models: the errors, the report (one `held_out_line` per
row), the rows outside the band, and the record's keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .record import device_tag


def measured(r: dict) -> float | None:
    return r.get("tbps") if r.get("tbps") is not None else r.get("tflops")


def held_out_line(name: str, measured_: float, err: float, *, band: float, unit: str, named=(), width: int = 22,
                  fmt: str = ".3f", note: str = "") -> str:
    """One row of a model's held-out report (every topic's `held_out_report` prints these): measured, the model's
    figure (measured x (1 + err)), the error, and — outside `band` — whether the model's FIT names the miss."""
    flag = ""
    if abs(err) > band:
        flag = f"   <- outside +-{band:.0%}" + (": named in model.FIT" if name in named else ": NOT named in model.FIT")
        flag += note
    return (f"  {name:<{width}} measured {measured_:{fmt}}  model {measured_ * (1 + err):{fmt}} {unit} "
            f"({err:+.1%}){flag}")


def _configured(r: dict) -> bool:
    return r.get("config") is not None


def _kernel(r: dict) -> str:
    return r["kernel"]


@dataclass(frozen=True)
class HeldOut:
    """A model's check on the rows it was not fitted to, declared once in its model.py and run here for every topic:
    the errors, the report (one `held_out_line` per row), the rows outside the band, and the record's keys.

        HELD_OUT_CHECK = HeldOut(FIT, FIT_ROWS, HELD_OUT, band=0.10, predict=_predict_row, unit="TB/s",
                                 refit=lambda record: fit(record["rows"], record["ceilings"]["copy_tbps"]),
                                 constants={"LATENCY_NS": LATENCY_NS})
        held_out_report = HELD_OUT_CHECK.report          # what the notebook prints

    `fit`: the model's FIT (its "source"; "held_out_outside_band": GPU tag -> row -> error, the misses it names);
    `predict(row, record, constants)`: the model's figure for one row of a record in the row's unit (TB/s or TFLOPS),
    or None where it does not cover it, with `constants` as `refit` returns them (None: the model's own);
    `refit(record)`: the constants fitted on that record's own fit rows (optional; `constants` names the fitted
    ones with the model's values, for the report); `select(row)`: the rows the model reads (the exercise's data, rows
    with a config); `name(row)`: a row's name in fit_rows / held_out; `known`: row -> a note on its report line (a
    miss explained elsewhere); `remarks`: lines that close the report."""
    fit: dict
    fit_rows: tuple
    held_out: tuple
    band: float
    predict: Callable[[dict, dict, dict | None], float | None]
    unit: str = "TB/s"
    refit: Callable[[dict], dict] | None = None
    constants: dict = field(default_factory=dict)
    select: Callable[[dict], bool] = _configured
    name: Callable[[dict], str] = _kernel
    known: dict = field(default_factory=dict)
    remarks: tuple = ()
    width: int = 22
    fmt: str = ".3f"

    def _rows(self, record: dict) -> dict:
        return {self.name(r): r for r in record["rows"] if self.select(r) and measured(r)}

    def errors(self, record: dict, constants: dict | None = None) -> dict:
        """{row: prediction / measurement - 1} for each held-out row the record measured and the model predicts (in
        the order of `held_out`), with `constants` (a refit's) or the model's own; a record needs "rows" and
        "ceilings" (each prediction takes its own run's ceilings)."""
        by, out = self._rows(record), {}
        for n in self.held_out:
            p = self.predict(by[n], record, constants) if n in by else None
            if p is not None:
                out[n] = p / measured(by[n]) - 1
        return out

    def outside_band(self, record: dict, constants: dict | None = None) -> dict:
        """The held-out rows outside the band: {row: error} (what FIT["held_out_outside_band"] names per GPU)."""
        return {n: e for n, e in self.errors(record, constants).items() if abs(e) > self.band}

    def facts(self, record: dict) -> dict:
        """What every topic's record holds of its model's held-out check (the scaffold writes it as extra["model"])."""
        errs = self.errors(record)
        out = {"fitted_on": self.fit, "fit_rows": list(self.fit_rows), "held_out_rows": list(self.held_out),
               "band": self.band, "unit": self.unit, "held_out": errs,
               "outside_band": {n: e for n, e in errs.items() if abs(e) > self.band}}
        missing = self.missing_fit_rows(record) if self.refit is not None else []
        if missing:
            out["refit"], out["refit_missing"] = None, missing
        elif self.refit is not None:
            out["refit"] = fitted = self.refit(record)
            out["refit_held_out"] = self.errors(record, fitted)
        return out

    def missing_fit_rows(self, record: dict) -> list[str]:
        """The fit rows a record lacks (a notebook's own run, timed without the known answers some fits need): no
        refit on it, said so rather than raised."""
        by = self._rows(record)
        return [n for n in self.fit_rows if n not in by]

    def report(self, record: dict) -> str:
        """The model against a record's held-out rows, one held_out_line each, the GPU and its run named; the rows
        outside the band say whether FIT names them; then what a refit on the record's own fit rows gives."""
        named = (self.fit.get("held_out_outside_band") or {}).get(device_tag(record.get("device")), {})
        by, copy = self._rows(record), (record.get("ceilings") or {}).get("copy_tbps")
        lines = [f"constants fit on {self.fit['source']} (rows {', '.join(self.fit_rows)}); held-out rows of "
                 f"{record['device']} ({record['date']}" + (f", copy ceiling {copy:.2f} TB/s" if copy else "")
                 + f"), band +-{self.band:.0%}:"]
        lines += [held_out_line(n, measured(by[n]), e, band=self.band, unit=self.unit, named=named, width=self.width,
                                fmt=self.fmt, note=f" ({self.known[n]})" if n in self.known else "")
                  for n, e in self.errors(record).items()]
        missing = self.missing_fit_rows(record) if self.refit is not None else []
        if missing:
            lines.append(f"no refit on this run: it lacks the fit rows {', '.join(missing)}")
        elif self.refit is not None:
            fitted = self.refit(record)
            worst = max((abs(e) for e in self.errors(record, fitted).values()), default=float("nan"))
            shown = ", ".join(f"{k} {shown_value(fitted.get(k))} (model {shown_value(v)})"
                              for k, v in self.constants.items())
            lines.append(f"its own fit rows refit: {shown}; held-out band {worst:.1%}")
        return "\n".join(lines + list(self.remarks))


def shown_value(v) -> str:
    return f"{v:,.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
