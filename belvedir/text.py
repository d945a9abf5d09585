"""Numbers as people read them, shared by templates (the `score` and `counted` filters), the
messages services raise and the CLI."""

from decimal import Decimal

# Every page and the CLI show a score with this many decimals; the API returns the stored number.
SCORE_DECIMALS = 3


def score_text(value) -> str:
    """A score as it is shown everywhere: "0.850", "1.000"; "—" when there is none."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:.{SCORE_DECIMALS}f}"


def score_with_error(score, stderr) -> str:
    """A score with its standard error when it has one: "0.620 ± 0.069"; else `score_text`."""
    if score_text(stderr) == "—" or score_text(score) == "—":
        return score_text(score)
    return f"{score_text(score)} ± {score_text(stderr)}"


def p_value_text(p) -> str:
    """A p-value as shown: "0.016", "< 0.001"; "—" when there is none."""
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def difference_text(value) -> str:
    """A difference of scores with its sign: "+0.160", "-0.040"; "—" when there is none."""
    return "—" if value is None else f"{value:+.{SCORE_DECIMALS}f}"


def counted(number: int, noun: str) -> str:
    """ "1 task", "2 tasks"; an irregular plural after a comma: counted(3, "entry,entries")."""
    singular, _, plural = noun.partition(",")
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def size_text(size: int, *, iec: bool = True) -> str:
    """A size in bytes as people read it, in powers of 1024: "512 B", "3.2 MiB", "2 GiB"; with
    iec=False "512 KB", "256 MB", as the limits' messages (and the docs) have always spelled them."""
    value = float(size)
    units = ("B", "KiB", "MiB", "GiB") if iec else ("B", "KB", "MB", "GB")
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            break
        value /= 1024
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.1f} {unit}".replace(".0 ", " ")


def usd(micros: int) -> str:
    """Integer micro-dollars as dollars, exactly: "$12.50", "-$0.50"; cents unless the amount
    has finer parts ("$0.015"), so a price or a balance is never shown rounded."""
    sign = "-" if micros < 0 else ""
    amount = Decimal(abs(int(micros))) / 1_000_000
    if amount == amount.quantize(Decimal("0.01")):
        return f"{sign}${amount:,.2f}"
    return f"{sign}${amount.normalize():,f}"


def ago_text(when, *, now) -> str:
    """How long before `now` `when` was, roughly: 'just now', '5 min ago', '2 h ago', '3 d ago'."""
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"
