"""The REST API's JSON parser (settings' DEFAULT_PARSER_CLASSES; a view naming its own parsers
names this one). Its own module: DRF reads the setting while `rest_framework.views` loads, so it
may not import that (belvedir.api does)."""

from rest_framework import exceptions, parsers


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, answering a body nested deeper than Python decodes (`[[[…]]]` 100,000
    deep: a RecursionError) as the malformed JSON it is, a 400 `parse_error`, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(
                "JSON parse error - the body is nested too deeply."
            ) from None
