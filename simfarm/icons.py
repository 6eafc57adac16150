"""Simple line icons drawn with Pillow primitives (no icon fonts on a fresh machine)."""
from simfarm import ui


def draw_icon(draw, box, name, color):
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    s = min(w, h)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    r = s * 0.36
    lw = max(3, int(s * 0.08))

    def line(*points):
        draw.line([(cx + px * s, cy + py * s) for px, py in points], fill=color, width=lw, joint="curve")

    if name == "back":
        line((0.25, 0), (-0.25, 0))
        line((-0.05, -0.2), (-0.25, 0), (-0.05, 0.2))
    elif name == "chevron":
        line((-0.1, -0.25), (0.15, 0), (-0.1, 0.25))
    elif name in ("add", "plus"):
        line((-0.28, 0), (0.28, 0))
        line((0, -0.28), (0, 0.28))
    elif name == "close":
        line((-0.25, -0.25), (0.25, 0.25))
        line((-0.25, 0.25), (0.25, -0.25))
    elif name == "check":
        line((-0.28, 0), (-0.08, 0.2), (0.3, -0.22))
    elif name == "search":
        draw.ellipse((cx - r * 0.8, cy - r * 0.8, cx + r * 0.4, cy + r * 0.4), outline=color, width=lw)
        line((0.1, 0.1), (0.32, 0.32))
    elif name in ("more", "menu"):
        for i in (-1, 0, 1):
            if name == "more":
                d = s * 0.06
                draw.ellipse((cx - d, cy + i * s * 0.22 - d, cx + d, cy + i * s * 0.22 + d), fill=color)
            else:
                line((-0.3, i * 0.2), (0.3, i * 0.2))
    elif name in ("wifi", "wifi_off", "signal"):
        if name == "signal":
            for i in range(4):
                bx = x1 + i * w / 4
                draw.rectangle((bx + 2, y2 - (i + 1) * h / 4, bx + w / 4 - 2, y2), fill=color)
        else:
            for k in (1.0, 0.66, 0.33):
                rr = s * 0.5 * k
                draw.arc((cx - rr, cy + s * 0.3 - rr, cx + rr, cy + s * 0.3 + rr), 225, 315, fill=color, width=lw)
            if name == "wifi_off":
                line((-0.4, -0.4), (0.4, 0.4))
    elif name == "airplane":
        line((0, -0.4), (0, 0.4))
        line((-0.35, 0.05), (0, -0.1), (0.35, 0.05))
    elif name == "refresh":
        draw.arc((cx - r, cy - r, cx + r, cy + r), 30, 330, fill=color, width=lw)
    elif name == "home":
        line((-0.3, 0), (0, -0.3), (0.3, 0))
        draw.rectangle((cx - s * 0.2, cy, cx + s * 0.2, cy + s * 0.3), outline=color, width=lw)
    elif name == "person":
        draw.ellipse((cx - s * 0.15, cy - s * 0.35, cx + s * 0.15, cy - s * 0.05), outline=color, width=lw)
        draw.arc((cx - s * 0.3, cy + s * 0.02, cx + s * 0.3, cy + s * 0.6), 180, 360, fill=color, width=lw)
    elif name == "mic":
        draw.rounded_rectangle((cx - s * 0.12, cy - s * 0.35, cx + s * 0.12, cy + s * 0.1), radius=int(s * 0.12),
                               outline=color, width=lw)
        line((0, 0.2), (0, 0.35))
    elif name == "download":
        line((0, -0.35), (0, 0.12))
        line((-0.18, -0.05), (0, 0.13), (0.18, -0.05))
        line((-0.3, 0.32), (0.3, 0.32))
    elif name == "delete":
        draw.rectangle((cx - s * 0.2, cy - s * 0.2, cx + s * 0.2, cy + s * 0.35), outline=color, width=lw)
        line((-0.3, -0.25), (0.3, -0.25))
        line((-0.08, -0.35), (0.08, -0.35))
    elif name in ("star", "heart"):
        import math
        points = []
        for i in range(10):
            radius = s * (0.38 if i % 2 == 0 else 0.16)
            angle = -math.pi / 2 + i * math.pi / 5
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        draw.polygon(points, outline=color, width=max(2, lw // 2))
    elif name in ("settings", "display", "apps", "lock", "bell", "camera", "chat", "clock", "sound", "battery",
                  "info", "play", "edit", "share", "globe", "translate", "cart", "filter", "language"):
        _symbol(draw, name, cx, cy, s, color, lw, line)
    else:  # a generic glyph: ring with the icon's first letter
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=color, width=lw)
        size = max(8, int(s * 0.4))
        font = ui.font(size)
        letter = (name[:1] or "?").upper()
        tw = ui.text_width(letter, size)
        ascent, descent = font.getmetrics()
        draw.text((cx - tw / 2, cy - (ascent + descent) / 2), letter, font=font, fill=color)


def _symbol(draw, name, cx, cy, s, color, lw, line):
    """Simple symbolic icons: recognisable shapes, not pixel-perfect Material icons."""
    def box(x1, y1, x2, y2, **kw):
        return (cx + x1 * s, cy + y1 * s, cx + x2 * s, cy + y2 * s)
    if name == "settings":
        draw.ellipse(box(-0.32, -0.32, 0.32, 0.32), outline=color, width=lw)
        draw.ellipse(box(-0.12, -0.12, 0.12, 0.12), fill=color)
    elif name == "display":
        draw.rectangle(box(-0.22, -0.35, 0.22, 0.35), outline=color, width=lw)
    elif name == "apps":
        for dx in (-0.2, 0.2):
            for dy in (-0.2, 0.2):
                draw.rectangle(box(dx - 0.1, dy - 0.1, dx + 0.1, dy + 0.1), fill=color)
    elif name == "lock":
        draw.rectangle(box(-0.25, -0.05, 0.25, 0.35), fill=color)
        draw.arc(box(-0.17, -0.38, 0.17, 0.1), 180, 360, fill=color, width=lw)
    elif name == "bell":
        draw.chord(box(-0.28, -0.35, 0.28, 0.35), 180, 360, fill=color)
        draw.rectangle(box(-0.28, -0.01, 0.28, 0.2), fill=color)
        draw.ellipse(box(-0.07, 0.22, 0.07, 0.36), fill=color)
    elif name == "camera":
        draw.rounded_rectangle(box(-0.36, -0.22, 0.36, 0.3), radius=int(s * 0.06), outline=color, width=lw)
        draw.ellipse(box(-0.13, -0.1, 0.13, 0.16), outline=color, width=lw)
    elif name == "chat":
        draw.rounded_rectangle(box(-0.35, -0.3, 0.35, 0.18), radius=int(s * 0.08), outline=color, width=lw)
        line((-0.15, 0.18), (-0.25, 0.35), (0.0, 0.18))
    elif name == "clock":
        draw.ellipse(box(-0.34, -0.34, 0.34, 0.34), outline=color, width=lw)
        line((0, -0.2), (0, 0), (0.15, 0.1))
    elif name == "sound":
        draw.polygon([(cx - s * 0.3, cy - s * 0.1), (cx - s * 0.1, cy - s * 0.1), (cx + s * 0.1, cy - s * 0.3),
                      (cx + s * 0.1, cy + s * 0.3), (cx - s * 0.1, cy + s * 0.1), (cx - s * 0.3, cy + s * 0.1)], fill=color)
        draw.arc(box(0.0, -0.25, 0.35, 0.25), 300, 60, fill=color, width=lw)
    elif name == "battery":
        draw.rectangle(box(-0.15, -0.3, 0.15, 0.35), outline=color, width=lw)
        draw.rectangle(box(-0.06, -0.38, 0.06, -0.3), fill=color)
    elif name == "info":
        draw.ellipse(box(-0.34, -0.34, 0.34, 0.34), outline=color, width=lw)
        line((0, -0.05), (0, 0.2))
        draw.ellipse(box(-0.04, -0.2, 0.04, -0.12), fill=color)
    elif name == "play":
        draw.polygon([(cx - s * 0.18, cy - s * 0.28), (cx + s * 0.3, cy), (cx - s * 0.18, cy + s * 0.28)], fill=color)
    elif name == "edit":
        line((-0.28, 0.28), (0.25, -0.25))
        line((-0.32, 0.32), (-0.2, 0.32))
    elif name == "share":
        for px, py in ((0.22, -0.25), (-0.22, 0.0), (0.22, 0.25)):
            draw.ellipse(box(px - 0.08, py - 0.08, px + 0.08, py + 0.08), fill=color)
        line((0.22, -0.25), (-0.22, 0.0), (0.22, 0.25))
    elif name in ("globe", "translate", "language"):
        draw.ellipse(box(-0.34, -0.34, 0.34, 0.34), outline=color, width=lw)
        draw.ellipse(box(-0.14, -0.34, 0.14, 0.34), outline=color, width=max(2, lw // 2))
        line((-0.34, 0), (0.34, 0))
    elif name == "cart":
        line((-0.38, -0.28), (-0.25, -0.28), (-0.15, 0.15), (0.28, 0.15), (0.35, -0.15), (-0.2, -0.15))
        draw.ellipse(box(-0.15, 0.22, -0.05, 0.32), fill=color)
        draw.ellipse(box(0.15, 0.22, 0.25, 0.32), fill=color)
    elif name == "filter":
        line((-0.32, -0.2), (0.32, -0.2))
        line((-0.2, 0.0), (0.2, 0.0))
        line((-0.08, 0.2), (0.08, 0.2))
