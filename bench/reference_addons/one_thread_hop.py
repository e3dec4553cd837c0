"""A reference addon for ``bench_proxy.py``'s throughput: one ``async`` request hook that hands
a call that does nothing to the event loop's default thread pool and awaits it. The least an
addon pays that keeps blocking work (a database read, a parse) off mitmproxy's event loop."""

import asyncio


class OneThreadHop:
    async def request(self, flow) -> None:
        await asyncio.get_running_loop().run_in_executor(None, len, b"")


addons = [OneThreadHop()]
