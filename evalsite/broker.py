"""The embedded, no-server broker: kombu's filesystem transport, made safe for several processes.

kombu writes a message straight into the queue folder under its final name, so a consumer in another
process can pick the file up while it is still empty or half written, fail to decode it, and lose the
message. Here a message is written under a temporary name and renamed into place, which is atomic on one
filesystem: a consumer sees the whole message or nothing.
"""

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, f".{name}.tmp")  # never matches "<queue>.msg"
        try:
            with open(temporary, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
