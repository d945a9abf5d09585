"""django-q2 entry points of the harnesses app: thin, take ids, safe to run twice."""

from harnesses import generation


def generate_environment(generation_id: str) -> str:
    return generation.generation_execute(generation_id=generation_id)
