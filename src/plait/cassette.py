"""Record and replay (`plait.cassette.Cassette`): the public face of
`plait.capabilities.cassette`; see that module for the file's format and the rules."""

from plait.capabilities.cassette import Cassette, Mode

__all__ = ["Cassette", "Mode"]
