"""Live phone screens in the browser (Channels).

- `frames`: one capture of a screen, encoded as JPEG once per viewer size, and the binary header
  each websocket frame starts with.
- `sources`: where captures come from (`screencap` polling over ADB, or a scrcpy server).
- `capture`: one capture loop per phone, shared by all its viewers; it keeps only the newest frame.
- `consumer`: the websocket a viewer opens (`/ws/devices/<id>/screen/`): frames out, input in.
- `control`: viewer input turned into canonical actions run by the executor, and console leases.
"""
