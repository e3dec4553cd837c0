"""A reference addon for ``bench_proxy.py``'s throughput: one ``async`` request hook that does
nothing. What mitmproxy itself costs an addon that has any async hook (a task per flow)."""


class EmptyAsyncHook:
    async def request(self, flow) -> None:
        return None


addons = [EmptyAsyncHook()]
