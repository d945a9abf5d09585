"""Words for numbers, shared by templates (the `counted` filter) and messages services raise."""


def counted(number: int, noun: str) -> str:
    """ "1 task", "2 tasks"; an irregular plural after a comma: counted(3, "entry,entries")."""
    singular, _, plural = noun.partition(",")
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
