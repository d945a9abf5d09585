"""DNS answers for tests of the pinned clients (`belvedir.pinned`), without asking any DNS."""

import ipaddress


def answers(*rounds: str):
    """A resolver answering `rounds[i]` the i-th time it is asked (the last one after); the
    names it was asked for in `resolve.asked`."""
    asked = []

    def resolve(host, port):
        asked.append(host)
        return [ipaddress.ip_address(rounds[min(len(asked), len(rounds)) - 1])]

    resolve.asked = asked
    return resolve
