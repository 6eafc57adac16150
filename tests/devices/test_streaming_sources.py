"""Frame sources behind one interface: screencap polling (default) and our scrcpy client."""
import asyncio
import io
import socket
import struct
import threading

import pytest
from PIL import Image

from devices.streaming import scrcpy
from devices.streaming.frames import Frame, Picture, fit_size, pack, png_size, unpack
from devices.streaming.sources import ScreencapSource, SourceUnavailable, configured_source_name


def png_of(size, color):
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def test_pictures_are_scaled_to_fit_the_viewer_and_encoded_once_per_size():
    picture = Picture(1, (1080, 2400), png=png_of((1080, 2400), "red"))
    jpeg, size = picture.jpeg((270, 600))
    assert size == (270, 600) and Image.open(io.BytesIO(jpeg)).size == (270, 600)
    assert picture.jpeg((270, 600))[0] is jpeg  # a second viewer of that size costs nothing
    assert fit_size((1080, 2400), (500, 500)) == (225, 500)  # aspect ratio kept
    assert fit_size((1080, 2400), (5000, 9000)) == (1080, 2400)  # never larger than the phone
    header, payload = unpack(pack(Frame(7, 1700000000.25, picture), jpeg, size))
    assert header == {"seq": 7, "captured_at": 1700000000.25, "width": 270, "height": 600,
                      "phone_width": 1080, "phone_height": 2400} and payload == jpeg


def test_screencap_source_reports_an_unchanged_screen_without_decoding():
    screens = [png_of((100, 200), "red"), png_of((100, 200), "red"), png_of((100, 200), "blue")]

    source = ScreencapSource(phone=None)
    source._screencap = lambda: screens.pop(0)  # the ADB part is covered by the farm tests
    first, second, third = source.capture(), source.capture(), source.capture()
    assert (first.unchanged, second.unchanged, third.unchanged) == (False, True, False)
    assert first.size == (100, 200) == png_size(third.png)


def test_the_source_is_chosen_by_stream_source(settings):
    from devices.streaming.feeds import source_plan

    settings.STREAM_SOURCE = "auto"
    assert configured_source_name() == "auto"
    settings.STREAM_SOURCE = "vnc"
    with pytest.raises(ValueError, match="choose one of auto, scrcpy, minicap, screencap"):
        configured_source_name()
    # Phone-side encoders first, relayed; screencap polling is always the last resort.
    assert source_plan("auto", ("h264", "jpeg")) == ["scrcpy", "minicap", "screencap"]
    assert source_plan("auto", ("jpeg",)) == ["minicap", "screencap"]
    assert source_plan("scrcpy", ("jpeg",)) == ["scrcpy-decoded", "screencap"]
    assert source_plan("scrcpy", ("h264",)) == ["scrcpy", "screencap"]
    assert source_plan("screencap", ("h264", "jpeg")) == ["screencap"]
    settings.SCRCPY_SERVER_JAR = "/nowhere/scrcpy-server-v2.4"
    phone = type("Phone", (), {"serial": "real-1"})()
    with pytest.raises(SourceUnavailable, match="SCRCPY_SERVER_JAR=/nowhere"):
        scrcpy.jar_on_phone(phone)


def serve(chunks):
    """A socket whose peer sends `chunks` (what a scrcpy server writes) then closes."""
    ours, theirs = socket.socketpair()

    def write():
        for chunk in chunks:
            theirs.sendall(chunk)
        theirs.close()

    threading.Thread(target=write, daemon=True).start()
    return ours


def test_our_scrcpy_client_reads_the_server_protocol():
    name = b"Pixel 7".ljust(64, b"\x00")
    config = struct.pack(">QI", scrcpy.CONFIG_FLAG, 3) + b"SPS"
    key = struct.pack(">QI", scrcpy.KEY_FRAME_FLAG | 1234, 5) + b"FRAME"
    stream = [b"\x00", name, struct.pack(">III", scrcpy.CODEC_H264, 1080, 2400), config, key[:7], key[7:]]
    sock = serve(stream)
    assert scrcpy.read_stream_header(sock) == {"device_name": "Pixel 7", "width": 1080, "height": 2400}
    assert scrcpy.read_packet(sock) == (True, False, 0, b"SPS")
    assert scrcpy.read_packet(sock) == (False, True, 1234, b"FRAME")  # split across reads
    with pytest.raises(scrcpy.ScrcpyProtocolError, match="closed"):
        scrcpy.read_packet(sock)
    with pytest.raises(scrcpy.ScrcpyProtocolError, match="dummy byte"):
        scrcpy.read_stream_header(serve([b"\x01"]))


def test_the_scrcpy_server_is_started_with_a_forward_tunnel_and_no_control():
    command = scrcpy.server_command("2.4", 0xABC, 1280)
    assert command.startswith(f"CLASSPATH={scrcpy.REMOTE_JAR} app_process / com.genymobile.scrcpy.Server 2.4 ")
    for option in ("scid=00000abc", "tunnel_forward=true", "control=false", "audio=false", "max_size=1280",
                   "send_frame_meta=true", "send_dummy_byte=true", "video_codec=h264"):
        assert option in command.split()


def test_scrcpy_capture_gives_the_newest_decoded_frame():
    source = scrcpy.ScrcpySource.__new__(scrcpy.ScrcpySource)  # no phone: feed decoded frames by hand
    source.phone, source.size = type("P", (), {"serial": "real-1"})(), (1080, 2400)
    source._latest, source._latest_number, source._returned_number, source._error = None, 0, 0, None
    source._new_frame = threading.Condition()
    for color in ("red", "green", "blue"):
        source._publish(Image.new("RGB", (540, 1200), color))
    capture = source.capture()
    assert capture.image.getpixel((0, 0)) == (0, 0, 255) and not capture.unchanged
    assert capture.size == (1080, 2400)  # input is placed in the phone's pixels, not the video's
    assert source.capture().unchanged  # nothing new within FRAME_WAIT
    source._publish(Image.new("RGB", (1200, 540), "red"))
    assert source.capture().size == (2400, 1080)  # the phone turned


async def test_one_capture_loop_per_phone_shared_by_its_viewers(monkeypatch):
    from devices.phone import PhoneConnection, PhoneUnavailable
    from devices.streaming import capture as capture_module
    from devices.streaming.sources import Capture

    script = [png_of((100, 200), "red")] * 3 + [PhoneUnavailable("sim-9 vanished")] + [png_of((100, 200), "blue")] * 50
    opened = []

    class ScriptedSource:
        def capture(self):
            item = script.pop(0) if len(script) > 1 else script[0]
            if isinstance(item, Exception):
                raise item
            return Capture(size=(100, 200), png=item, unchanged=False)

        def close(self):
            pass

    def open_scripted(phone, name=None):
        opened.append(phone.serial)
        return ScriptedSource()

    monkeypatch.setattr(capture_module, "open_source", open_scripted)
    monkeypatch.setattr(capture_module, "RETRY_SECONDS", 0.05)
    phone = PhoneConnection("127.0.0.1:1", "sim-9")
    loop = capture_module.capture_loop_for(phone)
    assert capture_module.capture_loop_for(phone) is loop  # a second viewer shares it
    loop.add_viewer("viewer-1", 30)
    loop.add_viewer("viewer-2", 30)
    seen_error, frame = None, await loop.newer_than(0)
    while not (seen_error and frame.picture and not frame.error and frame.seq > seen_error):
        frame = await loop.newer_than(frame.seq)
        if frame.error:
            assert frame.error == "sim-9 vanished"
            seen_error = frame.seq
    assert opened == ["sim-9", "sim-9"]  # reopened after the phone came back
    loop.remove_viewer("viewer-1")
    assert not loop._task.done()
    loop.remove_viewer("viewer-2")
    await asyncio.wait_for(loop._task, 2)  # nobody watches: the loop ends
    assert capture_module.capture_loop_for(phone) is not loop
