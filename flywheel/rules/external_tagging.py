"""Post-hoc four-dimensional tagging of external queries by rules (report §2.2.6).

Step depth, ambiguity tier, risk grade and prerequisites, for English and Chinese text, so an
imported query carries the same labels as a generated one. The lexicons are generic (mainstream
apps, common verbs and state phrases), not fitted to any data set; the LLM tagger
(flywheel/queries/external_tags.py) answers the same four fields when an endpoint is configured.
"""
import re

# --- apps named in the text -------------------------------------------------------------------
# Mainstream apps by the names people say, mapped to one canonical name (nicknames included).
CJK_APPS = {
    "微信": "微信", "QQ": "QQ", "QQ音乐": "QQ音乐", "QQ邮箱": "QQ邮箱", "QQ浏览器": "QQ浏览器",
    "支付宝": "支付宝", "淘宝": "淘宝", "淘宝闪购": "淘宝闪购", "天猫": "天猫", "京东": "京东",
    "拼多多": "拼多多", "闲鱼": "闲鱼", "得物": "得物", "唯品会": "唯品会", "盒马": "盒马",
    "朴朴": "朴朴超市", "朴朴超市": "朴朴超市", "美团": "美团", "美团外卖": "美团外卖", "饿了么": "饿了么",
    "大众点评": "大众点评", "抖音": "抖音", "快手": "快手", "小红书": "小红书", "微博": "微博",
    "知乎": "知乎", "豆瓣": "豆瓣", "B站": "哔哩哔哩", "哔哩哔哩": "哔哩哔哩", "爱奇艺": "爱奇艺",
    "腾讯视频": "腾讯视频", "优酷": "优酷视频", "优酷视频": "优酷视频", "芒果TV": "芒果TV",
    "西瓜视频": "西瓜视频", "网易云": "网易云音乐", "网易云音乐": "网易云音乐", "酷狗": "酷狗音乐",
    "酷狗音乐": "酷狗音乐", "酷我音乐": "酷我音乐", "喜马拉雅": "喜马拉雅", "番茄小说": "番茄免费小说",
    "番茄免费小说": "番茄免费小说", "起点读书": "起点读书", "微信读书": "微信读书", "今日头条": "今日头条",
    "腾讯新闻": "腾讯新闻", "网易新闻": "网易新闻", "百度": "百度", "百度地图": "百度地图",
    "高德": "高德地图", "高德地图": "高德地图", "腾讯地图": "腾讯地图", "滴滴": "滴滴出行",
    "滴滴出行": "滴滴出行", "携程": "携程旅行", "携程旅行": "携程旅行", "去哪儿": "去哪儿旅行",
    "去哪儿旅行": "去哪儿旅行", "同程": "同程旅行", "同程旅行": "同程旅行", "飞猪": "飞猪",
    "12306": "铁路12306", "铁路12306": "铁路12306", "大麦": "大麦", "猫眼": "猫眼", "瑞幸": "瑞幸咖啡",
    "瑞幸咖啡": "瑞幸咖啡", "钉钉": "钉钉", "飞书": "飞书", "企业微信": "企业微信", "WPS": "WPS",
    "相册": "相册", "图库": "相册", "相机": "相机", "通讯录": "通讯录", "短信": "短信", "日历": "日历",
    "闹钟": "时钟", "计算器": "计算器", "文件管理": "文件管理", "备忘录": "备忘录", "录音机": "录音机",
    "应用商店": "应用商店",
}
EN_APPS = {
    "WhatsApp": "WhatsApp", "Gmail": "Gmail", "Chrome": "Chrome", "YouTube": "YouTube",
    "Instagram": "Instagram", "Facebook": "Facebook", "Messenger": "Messenger", "Telegram": "Telegram",
    "Google Maps": "Google Maps", "Maps": "Maps", "Spotify": "Spotify", "Amazon": "Amazon", "Uber": "Uber",
    "Netflix": "Netflix", "TikTok": "TikTok", "Settings": "Settings", "Photos": "Photos",
    "Gallery": "Gallery", "Camera": "Camera", "Contacts": "Contacts", "Messages": "Messages",
    "Calendar": "Calendar", "Clock": "Clock", "Notes": "Notes", "Play Store": "Play Store",
}
# A Chinese app name counts where it is used as a place or a tool: after 在/去/上/用/打开/进…, at
# the start, or before 里/上/的/APP/首页 or a verb (so "最近的星巴克" or "找一个瑞幸" does not).
_BEFORE = r"(?:^|在|去|上|用|打开|开|进|到|回|给|从|让|和|与|跟|及|、|，|,|。|；|\s)$"
_AFTER = (r"^(?:里|上|中|内|的|APP|App|app|首页|搜|看|找|查|帮|给|放|听|播|下单|订|叫|约|发|点|加|刷|"
          r"买|筛|选|评|和|与|跟|及|、)")


def _cjk_app_mentions(text: str) -> list[tuple[int, str]]:
    found, taken = [], [False] * len(text)
    for name in sorted(CJK_APPS, key=len, reverse=True):
        for match in re.finditer(re.escape(name), text, flags=re.I):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            if name.isascii() and (start and text[start - 1].isascii() and text[start - 1].isalnum()
                                   or end < len(text) and text[end].isascii() and text[end].isalnum()):
                continue  # "QQ" inside a longer Latin word
            before, after = text[max(0, start - 2):start], text[end:end + 4]
            if not (re.search(_BEFORE, before) or re.match(_AFTER, after)):
                continue
            for i in range(start, end):
                taken[i] = True
            found.append((start, CJK_APPS[name]))
    return found


def apps_mentioned(text: str, known: dict | None = None) -> list[str]:
    """Apps the text names, in order of mention, canonical names, no repeats. `known` maps more
    labels (e.g. the farm's app labels) to names."""
    found = _cjk_app_mentions(text)
    for name, canonical in {**EN_APPS, **(known or {})}.items():
        for match in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
            found.append((match.start(), canonical))
    ordered = []
    for _, name in sorted(found):
        if name not in ordered:
            ordered.append(name)
    return ordered


# --- step depth ----------------------------------------------------------------------------------
ACTIONS_ZH = (r"打开|点开|点进|进入?|搜索?|找|查|筛选?|排序|排个序|排一下|按.{0,8}排|播放?|放|听|看|发|评论|留言|"
              r"回复|私信|收藏|关注|取关|订阅|点赞|赞同|转发|分享|下载|缓存|删|清掉|清空|加到|加入|添加|订|买|"
              r"下单|叫|约|预约|设置?|设成|改成|换成|调|切换|选|签到|标记|导航|规划|联系|问问?|说|创建|新建|"
              r"配文|写|取消")
ACTIONS_EN = (r"\b(open|launch|tap|click|go to|search|find|look up|filter|sort|play|watch|listen|send|post|"
              r"comment|reply|share|forward|like|follow|subscribe|save|favou?rite|download|delete|remove|clear|"
              r"add|order|buy|book|pay|call|set|change|switch|turn|select|choose|navigate|create|write|type|"
              r"upload|check|show|compare|mark|rename)\b")
QUOTED = re.compile(r"[“\"‘'「『《](.+?)[”\"’'」』》]")
ORDINAL_ZH = re.compile(r"第\s*[一二三四五六七八九十两\d]+\s*(个|张|首|条|篇|部|家|名|位|项|页)?|前[两二三四五十\d]+|头[两二三]")
ORDINAL_EN = re.compile(r"\b(first|second|third|fourth|fifth|last|top \d+|\d+(st|nd|rd|th))\b", re.I)


def _count(pattern: str | re.Pattern, text: str, flags=0) -> int:
    return len(re.findall(pattern, text, flags))


def step_depth(text: str, apps: list[str]) -> int:
    """The estimated minimum number of operations: opening each app, then about two steps per
    action (find the control, use it), one per typed text and one per item picked by position."""
    bare = QUOTED.sub("「」", text)   # verbs inside quoted content are not operations
    actions = _count(ACTIONS_ZH, bare) + _count(ACTIONS_EN, bare, re.I)
    typed = len(QUOTED.findall(text))
    picks = _count(ORDINAL_ZH, text) + _count(ORDINAL_EN, text)
    return max(1, max(1, len(apps)) + 2 * max(1, actions) + typed + picks)


# --- ambiguity -----------------------------------------------------------------------------------
STEP_MARKERS_ZH = re.compile(r"先|首先|然后|再|接着|之后|最后|第[一二三]步")
STEP_MARKERS_EN = re.compile(r"\b(first|then|next|after that|finally|step \d+)\b", re.I)
VAGUE_ZH = re.compile(r"那个|这个|随便|啥|什么的|之类|别的|有的没的|点啥|一些|某个|弄一下|搞一下|搞个|整一下|帮我弄")
VAGUE_EN = re.compile(r"\b(something|anything|that one|this one|whatever|some stuff|that thing|you know)\b", re.I)


def ambiguity(text: str) -> str:
    """L1 when the steps are narrated in order (two or more step markers), L3 when the text names
    no operation or leans on vague references with at most one operation, else L2."""
    bare = QUOTED.sub("「」", text)
    actions = _count(ACTIONS_ZH, bare) + _count(ACTIONS_EN, bare, re.I)
    markers = _count(STEP_MARKERS_ZH, bare) + _count(STEP_MARKERS_EN, bare)
    vague = bool(VAGUE_ZH.search(bare) or VAGUE_EN.search(bare))
    if actions == 0:
        return "L3"
    if markers >= 2 and actions >= 2:
        return "L1"
    if vague and actions <= 1:
        return "L3"
    return "L2"


# --- risk ----------------------------------------------------------------------------------------
# A clause that only asks about a price or compares offers does not commit anything.
INQUIRY = re.compile(r"多少钱|哪个便宜|哪个更便宜|价格|看看|查一下|查查|有没有|\bhow much\b|\bcompare\b|\bprice\b|"
                     r"\bcheck\b", re.I)
# Intent or past tense ("准备下单了", "上次买的") is not a request to act now.
NOT_NOW = re.compile(r"准备|打算|上次|之前|刚才?|已经")
RISKS = (
    ("high", "payment or order", re.compile(
        r"支付|付款|付钱|结算|转账|充值|购买|下单|(?<![在])买(?![了的过])|订(?!阅)(?:一|个|张|间|票|机票|酒店|一下)|"
        r"点[一两二三四五几]\s*[杯份个碗盒]|叫(?:个|辆|一辆|一个)|叫(?:车|快车|专车|出租)|打车|约(?:个|辆)?"
        r"(?:车|专车|快车|顺风车)|代驾|顺风车|\b(pay|buy|purchase|order|checkout|book|transfer money|top up)\b",
        re.I)),
    ("high", "account or privacy change", re.compile(
        r"密码|实名|注销|身份证|银行卡|隐私设置|解绑|\b(password|privacy settings|delete (my )?account|"
        r"bank card|id card)\b", re.I)),
    ("medium", "sends or posts to others", re.compile(
        r"发送|发给|发个|发帖|发布(?!的|时间|会)|发条|发一条|转发|分享给|评论|留言|回复|私信|弹幕|联系(?:卖家|商家|客服|他|她)|"
        r"(?:跟|和|问问?)(?:他|她|老板|卖家|商家|客服|博主|作者|好友|朋友|同事)|"
        r"\b(send|post|share .{0,20}\bwith|share .{0,20}\bto|comment|reply|message|email|tweet)\b", re.I)),
    ("medium", "deletes data", re.compile(
        r"删除|删掉|删了|清掉|清空|\b(delete|remove all|clear (my|the))\b", re.I)),
    ("medium", "account settings", re.compile(r"账号|账户|登录|绑定|\b(account|log ?in|sign ?in)\b", re.I)),
)
GRADES = ("low", "medium", "high")
_CLAUSES = re.compile(r"[，,。；;！!？?\n]|然后|再|and then|\bthen\b")


def risk(text: str) -> tuple[str, list[str]]:
    """(grade, reasons): high for payment/order and account/privacy changes, medium for sending
    or posting to others, deleting data or touching the account; a clause that only inquires
    (a price, a comparison) or speaks of intent/the past does not count."""
    bare = QUOTED.sub("「」", text)
    grade, reasons = "low", []
    for clause in _CLAUSES.split(bare):
        for level, reason, pattern in RISKS:
            match = pattern.search(clause)
            if not match:
                continue
            if NOT_NOW.search(clause[:match.start()]) or (level == "high" and reason == "payment or order"
                                                           and INQUIRY.search(clause)):
                continue
            if reason == "account settings" and not re.search(r"改|换|设|修改|绑定|解绑|change|set|update",
                                                               clause, re.I):
                continue
            label = f"{reason}: {match.group(0).strip()}"
            if label not in reasons:
                reasons.append(label)
            grade = max(grade, level, key=GRADES.index)
    return grade, reasons


# --- prerequisites -------------------------------------------------------------------------------
PREREQUISITES = (
    # Own data that must exist: favourites, orders, cart, downloads, history, lists, coupons.
    ("own data exists: {0}", re.compile(
        r"(?:我的?|我在.{0,6}?|我.{0,4}?)(收藏夹?|收藏的|关注列表|关注|订阅列表|订单|快递|购物车|下载列表|下载的|缓存好?的|"
        r"缓存的|观看历史|历史记录|足迹|歌单|加追列表|追剧列表|优惠券|券|状态|买了)")),
    ("own data exists: {0}", re.compile(r"(?<!加到)(?<!加入)(?<!放进)(购物车|收藏夹|收藏列表|下载列表|订阅列表|订单记录|"
                                         r"观看历史|浏览记录|足迹|优惠券|能用的券|订单)")),
    ("earlier activity exists: {0}", re.compile(r"(上次|之前|刚才?|最近又?)(?:在.{0,6}?)?(.{0,6}?)(买|看|存|收藏|听|加)")),
    ("contact exists: {0}", re.compile(r"好友|(?:发给|分享给|转发给)(?:我的?)?(?:QQ|微信)?的?\S{1,3}")),
    ("photos in the album: {0}", re.compile(r"相册(?:里|中)?的?第\s*[一二三四五六七八九十\d]+\s*张|相册里?.{0,4}照片")),
    ("list has enough items: {0}", re.compile(
        r"第\s*[二三四五六七八九十\d]+\s*(个|张|首|条|篇|部|家|名|位)|前\s*[两二三四五\d]\s*(个|首|条|名)?|头[两二三]个|最底下那")),
    ("saved address: {0}", re.compile(r"(?:从|回|到|去)(家|公司)(?![具庭人乡])")),
    ("current state differs: {0}", re.compile(
        r"(?<!取消)(?<!最多)(?:收藏|关注|订阅|点赞|点上?赞|红心|标记成?|签个?到|加到我喜欢|加到追看|加追|下载|下到手机|"
        r"取关|取消收藏|(?:改|换|调|设|切换)成|设为|调(?:下|一下)?(?:字体|字号|亮度|模式)|"
        r"下(?:个|一个|一部|部)(?!月|周|星期|礼拜|季|集|路口|站|阶段|版本|时间|午))(?![的数量])")),
    ("logged in / bound: {0}", re.compile(r"已登录|登录状态|绑定的?(?:银行)?卡|实名认证")),
    # English
    ("own data exists: {0}", re.compile(
        r"\bmy (cart|orders?|favou?rites|saved \w+|playlists?|downloads|history|wishlist|coupons|notes|photos|"
        r"subscriptions|watch later|followers|following)\b", re.I)),
    ("contact exists: {0}", re.compile(r"\b(to|with) (my )?(friend|contact) \w+|\bmy (friend|contact)s?\b", re.I)),
    ("list has enough items: {0}", re.compile(r"\b(second|third|fourth|fifth|last) (photo|item|song|video|post|one)\b",
                                               re.I)),
    ("logged in / bound: {0}", re.compile(r"\b(logged in|signed in|bound card|linked card|saved (card|address))\b",
                                           re.I)),
    ("saved address: {0}", re.compile(r"\b(from|to) (home|work)\b", re.I)),
)


def prerequisites(text: str) -> list[str]:
    """Normalised phrases for the physical preconditions the text depends on (what the farm must
    preset): own data that must exist, earlier activity, contacts, enough items for a position,
    saved addresses, the opposite current state of something the query toggles, a login."""
    bare = QUOTED.sub("「」", text)
    found = []
    for template, pattern in PREREQUISITES:
        for match in pattern.finditer(bare):
            # Own data is named by what must exist ("购物车", "orders"), not the words around it.
            words = match.group(1) if template.startswith("own data") and pattern.groups else match.group(0)
            phrase = template.format(re.sub(r"\s+", " ", words).strip())
            if phrase not in found:
                found.append(phrase)
    return found


def tag(text: str, known_apps: dict | None = None) -> dict:
    """The four dimensions (plus the apps named and whether a clarification/hand-over is due)."""
    text = " ".join(str(text).split())
    apps = apps_mentioned(text, known_apps)
    grade, reasons = risk(text)
    tier = ambiguity(text)
    return {"step_depth": step_depth(text, apps), "ambiguity": tier, "risk": grade, "risk_reasons": reasons,
            "prerequisites": prerequisites(text), "apps": apps,
            "clarify": tier == "L3" or grade != "low"}
