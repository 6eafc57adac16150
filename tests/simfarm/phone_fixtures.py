"""Shared helpers for the in-process phone tests (no ADB, no database)."""
import io
import xml.etree.ElementTree as ET

from PIL import Image

from simfarm.appspec import load_apps
from simfarm.phone import VirtualPhone
from simfarm.walker import center, find, parse_bounds

APPS = load_apps()


def new_phone(index=0, seed=0, **options):
    return VirtualPhone(index, seed, APPS, **options)


def sh(phone, command):
    """Run a command that must succeed; returns stdout as text."""
    result = phone.run(command)
    assert result.exit_code == 0, (command, result)
    return result.stdout.decode()


def screen(phone):
    return Image.open(io.BytesIO(phone.run("screencap -p").stdout)).convert("RGB")


def xml_root(phone):
    return ET.fromstring(phone.dump_hierarchy())


def node(phone, **target):
    found = find(xml_root(phone), target)
    assert found is not None, f"{target} not on screen"
    return found


def tap(phone, **target):
    x, y = center(node(phone, **target))
    sh(phone, f"input tap {x} {y}")


def bounds(phone, **target):
    return parse_bounds(node(phone, **target).attrib["bounds"])


def texts(phone):
    return [n.attrib["text"] for n in xml_root(phone).iter("node") if n.attrib["text"]]


def focus(phone):
    return phone.engine.focus()[0], phone.engine.resumed()
