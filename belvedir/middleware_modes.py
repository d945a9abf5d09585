"""A base for our middleware that runs in either mode."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class BothModes:
    """Runs in the mode of the chain it sits in (under ASGI: async), so an async view (the
    model router) is not pushed onto a worker thread by a sync-only middleware."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return self.get_response(request)

    async def __acall__(self, request):
        return await self.get_response(request)
