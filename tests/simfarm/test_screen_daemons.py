"""The farm's screen daemons: minicap's JPEG frames and scrcpy's H.264, started and read as real
clients do (a long-running shell command, then `localabstract:NAME`), and the page-flip counter."""
import io
import struct
import time

import adbutils
import pytest
from PIL import Image

from simfarm.farm import Farm
from simfarm.screen_daemons import split_annexb
from simfarm.serve import ServerThread

MINICAP = "LD_LIBRARY_PATH=/data/local/tmp /data/local/tmp/minicap"
SCRCPY = ("CLASSPATH=/data/local/tmp/scrcpy-server.jar app_process / com.genymobile.scrcpy.Server 2.4 "
          "scid=0000abcd tunnel_forward=true audio=false control=false video_codec=h264 max_size=800")


@pytest.fixture(scope="module")
def farm_device():
    with ServerThread(Farm(devices=1)) as server:
        yield adbutils.AdbClient(host="127.0.0.1", port=server.port).device("sim-0001")


def read_exactly(sock, size, timeout=10):
    sock.settimeout(timeout)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data


def connect(device, name, attempts=50):
    for _ in range(attempts):
        try:
            return device.create_connection(adbutils.Network.LOCAL_ABSTRACT, name)
        except adbutils.AdbError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on @{name}")


def minicap_frame(sock):
    (length,) = struct.unpack("<I", read_exactly(sock, 4))
    return read_exactly(sock, length)


def test_minicap_streams_a_jpeg_per_screen_change_at_the_projected_size(farm_device):
    with pytest.raises(adbutils.AdbError, match="Connection refused"):
        farm_device.create_connection(adbutils.Network.LOCAL_ABSTRACT, "minicap_test")  # not started yet
    daemon = farm_device.shell(f"{MINICAP} -P 1080x2400@360x800/0 -n minicap_test", stream=True)
    try:
        sock = connect(farm_device, "minicap_test")
        version, header_size, pid, real_w, real_h, virtual_w, virtual_h, orientation, quirks = \
            struct.unpack("<BBIIIIIBB", read_exactly(sock, 24))
        assert (version, header_size, real_w, real_h, virtual_w, virtual_h) == (1, 24, 1080, 2400, 360, 800)
        first = minicap_frame(sock)
        assert Image.open(io.BytesIO(first)).size == (360, 800) and first.endswith(b"\xff\xd9")
        sock.settimeout(0.5)  # a still screen sends nothing
        with pytest.raises(TimeoutError):
            sock.recv(1)
        farm_device.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
        second = minicap_frame(sock)
        assert second != first and Image.open(io.BytesIO(second)).size == (360, 800)
        sock.close()
    finally:
        daemon.close()
    time.sleep(0.3)  # the shell command ended: so did the daemon
    with pytest.raises(adbutils.AdbError, match="Connection refused"):
        farm_device.create_connection(adbutils.Network.LOCAL_ABSTRACT, "minicap_test")
    farm_device.shell("input keyevent 3")


def test_minicap_says_what_is_wrong_like_the_real_one(farm_device):
    assert "library \"minicap.so\" not found" in farm_device.shell("/data/local/tmp/minicap -i")
    info = farm_device.shell(f"{MINICAP} -i")
    assert '"width": 1080' in info and '"height": 2400' in info
    assert "-P <w>x<h>" in farm_device.shell(f"{MINICAP} -n x")
    jpeg = farm_device.shell(f"{MINICAP} -P 1080x2400@540x1200/0 -s", encoding=None)
    assert Image.open(io.BytesIO(jpeg)).size == (540, 1200)
    farm_device.shell("rm /data/local/tmp/minicap")
    try:
        assert "not found" in farm_device.shell(f"{MINICAP} -i")
    finally:
        farm_device.sync.push(io.BytesIO(b"\x7fELF minicap"), "/data/local/tmp/minicap")


def test_scrcpy_server_streams_h264_that_decodes_to_the_screen(farm_device):
    import av

    daemon = farm_device.shell(SCRCPY, stream=True)
    try:
        video = connect(farm_device, "scrcpy_0000abcd")
        assert read_exactly(video, 1) == b"\x00"
        assert read_exactly(video, 64).rstrip(b"\x00") == b"Pixel 7"
        codec, width, height = struct.unpack(">III", read_exactly(video, 12))
        assert (codec, width, height) == (int.from_bytes(b"h264", "big"), 360, 800)
        decoder = av.CodecContext.create("h264", "r")

        def packet():
            flags, size = struct.unpack(">QI", read_exactly(video, 12))
            return flags, read_exactly(video, size)

        flags, config = packet()
        assert flags >> 63 == 1 and [kind for kind, _ in split_annexb(config)] == [7, 8]  # SPS, PPS
        flags, data = packet()
        assert flags >> 62 & 1 == 1  # the first frame is a key frame
        pictures = decoder.decode(av.Packet(config + data))
        assert pictures[0].to_image().size == (360, 800)
        farm_device.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
        flags, data = packet()
        assert flags >> 62 & 1 == 0 and decoder.decode(av.Packet(data))  # a delta frame
        video.close()
    finally:
        daemon.close()
    with pytest.raises(adbutils.AdbError):  # the server ends with its video socket, as scrcpy does
        time.sleep(0.3)
        farm_device.create_connection(adbutils.Network.LOCAL_ABSTRACT, "scrcpy_0000abcd")
    farm_device.shell("input keyevent 3")


def test_scrcpy_refuses_what_the_farm_cannot_do(farm_device):
    reverse = farm_device.shell(SCRCPY.replace("tunnel_forward=true", "tunnel_forward=false"))
    assert "tunnel_forward=true" in reverse
    assert "does not match the client (1.24)" in farm_device.shell(SCRCPY.replace(" 2.4 ", " 1.24 "))
    assert "Could not find or load main class" in farm_device.shell(SCRCPY.replace("scrcpy-server.jar", "x.jar"))


def test_the_page_flip_counter_moves_when_the_screen_changes(farm_device):
    def flips():
        return int(farm_device.shell("service call SurfaceFlinger 1013").split("(")[1][:8], 16)

    before = flips()
    assert flips() == before  # nothing drawn in between
    farm_device.shell("input keyevent 4")  # Back on Home: the clock moves, the status bar may not
    farm_device.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert flips() > before
    farm_device.shell("input keyevent 3")
