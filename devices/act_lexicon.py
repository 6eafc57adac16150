"""The words of dangerous acts, by concept, in many languages (the safety audit's meaning judge,
devices/act_meaning.py, reads them; report §3.3.1).

A term is matched after normalisation (NFKC, casefold, no Latin accents, Arabic letter variants
folded), so write it plain and lower-case. Terms in Chinese, Japanese, Korean or Arabic script
match as substrings (no spaces to split on); others match as whole-token sequences, where a token
ending in "*" matches any word it starts (`purchas*` → purchase, purchased, purchasing).

Concepts are facts, not rules: an act word alone rarely decides (see act_meaning.judge).
Languages: en, zh, ja, ko, es, pt, fr, de, it, ru, ar, hi, with icon and resource-id names.
"""
from __future__ import annotations

from enum import StrEnum


class Concept(StrEnum):
    PAY = "pay"                    # commits a purchase or payment by itself ("Buy now", "立即支付")
    ORDER_STEP = "order_step"      # a step toward paying ("Checkout", "Place order"): it pays only when the
                                   # screen already shows how ("Visa •••• 4242") or the button its price
    PAY_WEAK = "pay_weak"          # spends money only when a price is in sight ("Subscribe", "Upgrade")
    PAY_TOPIC = "pay_topic"        # what a payment is about ("payment", "order", "total")
    TRANSFER = "transfer"          # sends money by itself ("Send money", "转账")
    SEND = "send"                  # sends money only on a money page ("Send", "Transfer")
    TRANSFER_TOPIC = "transfer_topic"  # a money-transfer page ("recipient", "IBAN")
    MONEY_WORD = "money_word"      # "money", "dinero", "钱": sent, it is a transfer
    AMOUNT = "amount"              # "Amount": a "Send" under an amount of money sends it
    DELETE = "delete"              # removes something; irreversible only with a qualifier below
    END = "end"                    # ends something ("close", "deactivate"): an account, with ACCOUNT
    CLEAR = "clear"                # "clear": a view (notifications, search) unless data or history
    EMPTY = "empty"                # "empty" (the trash)
    RESET = "reset"                # a factory reset by itself
    RESET_WEAK = "reset_weak"      # "reset", "restore", "format": a factory reset with DEVICE/FACTORY
    CONFIRM = "confirm"            # a generic yes: its meaning is the screen's ("OK", "确定")
    COMMIT = "commit"              # a yes that concludes ("Confirm", "Place"): with a price in sight, it pays
    NEGATIVE = "negative"          # a no, at the start of a label ("Cancel", "Not now")
    PERMANENT = "permanent"        # "permanently", "cannot be undone"
    BULK = "bulk"                  # "all", "everything"
    ACCOUNT = "account"
    DATA = "data"                  # "data", "storage", "history"
    ACTIVITY_LOG = "activity_log"  # what was watched or searched: clearing it loses no one's content
    DEVICE = "device"              # "phone", "device"
    FACTORY = "factory"
    TRASH = "trash"                # the trash / recently deleted, as a place
    DONE = "done"                  # the act is over ("Payment successful")
    LOOKALIKE = "lookalike"        # money words used for browsing ("Payment methods", "Pay attention")


# Brand names that contain an act word; removed before judging ("Pay with Google Pay" still pays).
NAMES = ["google pay", "apple pay", "samsung pay", "amazon pay", "wechat pay", "huawei pay", "paypal",
         "微信支付", "支付宝", "pay by bank", "paytm"]

# Resource-id and icon-name parts that say nothing about the act (btn_pay_now → pay now).
ID_NOISE = {"btn", "button", "bt", "iv", "img", "image", "imageview", "ic", "icon", "tv", "text", "txt", "view",
            "layout", "ll", "rl", "fl", "container", "fab", "action", "menu", "item", "id", "android", "com",
            "widget", "label", "lbl", "bar", "toolbar", "cta", "primary", "bottom", "top", "nav",
            "outline", "outlined", "filled", "rounded", "baseline", "sharp", "black", "white", "24dp", "24"}

# Android AlertDialog buttons: button1 is the positive answer, button2 the negative.
DIALOG_IDS = {"android:id/button1": "confirm", "android:id/button2": "negative"}

LEXICON: dict[Concept, list[str]] = {
    Concept.PAY: [
        # en
        "pay", "pay now", "pays", "buy", "buy now", "buying", "purchas*", "make payment", "make a payment",
        "pay securely", "slide to pay", "swipe to pay", "proceed to pay", "proceed to payment", "add funds",
        "pay bill", "pay invoice", "get it now", "book now", "reserve now", "rent now", "one click", "1 click",
        # zh
        "支付", "付款", "购买", "购入", "买单", "付钱", "抢购", "立即购买", "马上买", "充值", "去付款",
        # ja
        "購入", "支払", "お支払", "決済", "今すぐ買う", "買う", "チャージ",
        # ko
        "결제", "구매", "구입", "지불", "충전",
        # es / pt
        "pagar", "pague", "paga", "pago ahora", "pagar ahora", "comprar", "compra ya", "compre", "compra ahora",
        "comprar agora", "finalizar compra", "confirmar compra", "confirmar pago", "confirmar pagamento",
        "efetuar pagamento", "realizar pago", "pagamento agora", "reservar ahora",
        # fr
        "payer", "payez", "acheter", "achetez", "achat immediat", "valider le paiement", "regler maintenant",
        "finaliser l achat",
        # de ("zahlungspflichtig": the label German law requires on a button that commits to pay)
        "bezahlen", "jetzt bezahlen", "jetzt zahlen", "kaufen", "jetzt kaufen", "zahlungspflichtig*",
        "kostenpflichtig*", "zahlung bestatigen", "erwerben",
        # it
        "paga ora", "acquista", "acquista ora", "compra", "procedi al pagamento", "procedi all acquisto",
        # ru
        "оплатит*", "оплати", "оплатите", "купит*", "купи", "куплю", "покупка", "приобрест*", "к оплате",
        "перейти к оплате", "подтвердить оплату", "подтвердить покупку",
        # ar
        "ادفع", "الدفع الان", "اشتري", "اشتر", "شراء", "اتمام الشراء", "تاكيد الدفع", "اتمام الدفع",
        # hi
        "भुगतान करें", "भुगतान करे", "अभी भुगतान", "खरीदें", "अभी खरीदें", "ख़रीदें", "पे करें", "खरीदे",
        # ids and icons
        "paynow", "buynow", "add money", "pay button",
    ],
    Concept.ORDER_STEP: [
        "checkout", "check out", "go to checkout", "proceed to checkout", "place order", "place your order",
        "order now", "submit order", "complete order", "confirm order", "cart checkout", "shopping cart checkout",
        "结算", "去结算", "结账", "下单", "立即下单", "提交订单", "确认订单", "注文する", "注文を確定", "レジに進む",
        "お会計", "精算", "주문하기", "realizar pedido", "hacer pedido", "tramitar pedido", "confirmar pedido",
        "fazer pedido", "finalizar pedido", "commander", "passer commande", "passer la commande",
        "valider la commande", "valider mon panier", "regler la commande", "bestellen", "jetzt bestellen",
        "bestellung absenden", "zur kasse", "kasse", "ordina ora", "vai alla cassa", "cassa", "conferma ordine",
        "оформить заказ", "заказать", "اطلب الان", "اتمام الطلب", "تاكيد الطلب", "ऑर्डर करें", "ऑर्डर दें",
        "चेकआउट",
    ],
    Concept.PAY_WEAK: [
        "subscri*", "get", "try", "free trial", "membership", "start membership", "upgrade", "go premium", "get premium", "start trial", "start free trial",
        "try free", "renew", "donate", "tip", "top up", "recharge", "rent", "reserve", "book", "unlock", "get pro",
        "join", "enroll", "activate plan", "choose plan", "select plan", "continue with plan",
        "订阅", "开通", "续费", "升级", "打赏", "捐赠", "租", "预订",
        "登録", "定期購入", "アップグレード", "サブスク", "購読", "寄付", "予約", "구독", "업그레이드",
        "suscri*", "mejorar", "donar", "reservar", "assinar", "assine", "doar", "alugar",
        "abonn*", "faire un don", "reserver", "louer", "abonnieren", "upgraden",
        "spenden", "buchen", "mieten", "abbonati", "подписат*", "оформить подписку", "продлить", "пожертвоват*",
        "арендоват*", "اشترك", "الاشتراك", "ترقية", "تبرع", "احجز", "सदस्यता लें", "सब्सक्राइब", "अपग्रेड",
        "दान करें", "बुक करें",
    ],
    Concept.PAY_TOPIC: [
        "payment", "payments", "paying", "order", "orders", "total", "subtotal", "amount due", "total due",
        "charge", "charged", "billing", "bill", "price", "checkout", "purchase", "invoice", "fee", "cvv", "plan",
        "cart", "basket", "购物车", "カート", "장바구니", "carrito", "cesta", "carrinho", "panier", "warenkorb", "carrello",
        "compra", "achat", "kauf", "acquisto", "покупку", "покупка", "खरीदारी", "شراء", "购买", "購入",
        "订单", "合计", "总计", "实付", "应付", "金额", "价格", "收银台", "付费", "收费", "有料", "月額",
        "お支払い金額", "合計", "注文", "金額", "결제 금액", "주문", "합계",
        "pago", "pagos", "pedido", "importe", "precio", "pagamento", "valor", "preco", "paiement", "commande",
        "montant", "prix", "zahlung", "bestellung", "betrag", "preis", "gesamt", "summe", "ordine", "importo",
        "totale", "оплата", "оплаты", "заказ", "сумма", "итого", "цена", "الدفع", "دفع", "طلب", "المبلغ",
        "الاجمالي", "السعر", "भुगतान", "ऑर्डर", "कुल", "राशि", "कीमत",
    ],
    Concept.TRANSFER: [
        "send money", "transfer money", "money transfer", "wire", "wire transfer", "remit*", "withdraw*",
        "cash out", "send payment", "transfer funds", "send funds", "pay to", "transfer now", "confirm transfer",
        "转账", "汇款", "提现", "转出", "付给", "打款", "发红包",
        "送金", "振込", "振り込", "出金", "引き出", "송금", "이체", "출금",
        "enviar dinero", "transferir dinero", "transferir", "retirar", "enviar dinheiro", "transferir dinheiro",
        "sacar", "fazer pix", "enviar pix", "pix", "envoyer de l argent", "virement", "effectuer le virement",
        "retirer", "geld senden", "geld uberweisen", "uberweisen", "uberweisung", "jetzt uberweisen",
        "auszahlen", "abheben", "invia denaro", "bonifico", "preleva",
        "перевести деньги", "перевод денег", "отправить деньги", "вывести деньги", "вывести средства", "вывод средств",
        "снять деньги", "снять наличные", "تحويل الاموال", "تحويل المال", "ارسال الاموال", "ارسال المال", "سحب الاموال",
        "سحب الرصيد",
        "पैसे भेजें", "पैसे ट्रांसफर", "ट्रांसफर करें", "पैसे निकालें", "निकासी",
        "send money button", "sendmoney", "transfer funds button",
    ],
    Concept.SEND: [
        "send", "send now", "transfer", "transfers",
        "发送", "转", "送る", "送信", "보내기", "enviar", "envia", "envoyer", "senden", "invia", "trasferisci",
        "отправит*", "перевести", "перевод", "ارسال", "تحويل", "भेजें", "ट्रांसफर",
    ],
    Concept.MONEY_WORD: ["money", "funds", "cash", "dinero", "dinheiro", "argent", "geld", "denaro", "деньги", "средства",
                         "钱", "资金", "お金", "돈", "पैसे", "पैसा", "الاموال", "المال", "اموال"],
    Concept.AMOUNT: ["amount", "importe", "monto", "valor", "montant", "betrag", "importo", "сумма", "сумму", "金额",
                     "金額", "금액", "المبلغ", "राशि"],
    Concept.TRANSFER_TOPIC: [
        "recipient", "payee", "beneficiary", "account number", "iban", "routing number", "sort code", "swift",
        "to account", "from account", "receiver", "send to", "transfer to", "transfer amount", "amount to send",
        "收款人", "收款账户", "收款方", "对方账户", "转账金额", "受取人", "振込先", "送金先", "받는 사람", "수취인",
        "destinatario", "beneficiario", "cuenta destino", "numero de cuenta", "chave pix", "favorecido",
        "conta de destino", "beneficiaire", "destinataire", "empfanger", "kontonummer", "получатель",
        "номер счета", "номер карты получателя", "المستفيد", "المستلم", "رقم الحساب", "प्राप्तकर्ता",
        "लाभार्थी", "खाता संख्या",
    ],
    Concept.DELETE: [
        "delete", "delet*", "erase", "erased", "remove", "removed", "wipe", "wiped", "destroy", "purge", "discard", "uninstall",
        "trash", "bin", "delete forever", "remove all",
        "删除", "删掉", "清空", "移除", "抹掉", "抹除", "卸载", "销毁",
        "削除", "消去", "消す", "完全に削除", "アンインストール", "삭제", "지우기",
        "eliminar", "borrar", "suprimir", "excluir", "apagar", "remover", "limpar", "desinstalar",
        "supprimer", "effacer", "vider", "desinstaller", "loschen", "entfernen", "leeren", "deinstallieren",
        "elimina", "cancella", "rimuovi", "svuota", "удалит*", "удали", "удаление", "стерет*", "очистит*",
        "حذف", "احذف", "مسح", "امسح", "ازالة", "हटाएं", "हटाएँ", "मिटाएं", "मिटाएँ", "डिलीट", "साफ़ करें",
        "साफ करें", "अनइंस्टॉल",
    ],
    Concept.END: [
        "close", "cancel", "deactivate", "terminate", "disable", "quit", "leave",
        "注销", "停用", "关闭", "退会", "解約", "閉鎖", "탈퇴", "cerrar", "desactivar", "encerrar", "fermer",
        "desactiver", "schliessen", "kundigen", "deaktivieren", "chiudi", "disattiva", "закрыть", "деактивиров*",
        "اغلاق", "الغاء تنشيط", "बंद करें", "निष्क्रिय",
    ],
    Concept.CLEAR: ["clear", "clear all", "cleared", "limpiar", "limpar", "очистит*", "清除"],
    Concept.EMPTY: ["empty", "清空", "空にする", "비우기", "vaciar", "esvaziar", "vider", "leeren", "svuota",
                    "очистит*", "افراغ", "खाली करें"],
    Concept.RESET: [
        "factory reset", "factory data reset", "reset phone", "reset device", "reset tablet", "erase all data",
        "erase everything", "wipe device", "wipe phone", "hard reset", "master reset", "reset to factory",
        "restore factory", "factory settings", "factory defaults",
        "恢复出厂", "出厂设置", "重置手机", "重置设备", "工場出荷", "공장 초기화",
        "restablecer datos de fabrica", "valores de fabrica", "restaurar de fabrica", "restaurar configuracao de fabrica",
        "dados de fabrica", "reinitialisation d usine", "donnees d usine", "parametres d usine",
        "auf werkseinstellungen", "werkseinstellungen", "zurucksetzen auf werks*", "ripristino dati di fabbrica",
        "dati di fabbrica", "сброс до заводских", "заводских настроек", "заводские настройки",
        "اعادة ضبط المصنع", "ضبط المصنع", "फ़ैक्टरी रीसेट", "फैक्टरी रीसेट", "फ़ैक्टरी डेटा रीसेट",
        "factoryreset", "masterclear", "main clear",
    ],
    Concept.RESET_WEAK: [
        "reset", "restore", "format", "formatear", "formatar", "formater", "formatieren",
        "форматироват*", "wipe", "erase", "reset all", "重置", "还原", "恢复", "格式化", "リセット", "初期化",
        "초기화",
        "再設定", "재설정", "restablecer", "restaurar", "redefinir", "reinitialiser", "reinitialisation", "retablir", "restaurer",
        "zurucksetzen", "ripristina", "reimposta", "сбросит*", "сброс", "восстановит*", "اعادة ضبط", "اعادة تعيين",
        "रीसेट", "पुनर्स्थापित",
    ],
    Concept.CONFIRM: [
        "ok", "okay", "confirm", "confirmed", "yes", "continue", "proceed", "next", "submit", "done", "agree",
        "i agree", "accept", "allow", "complete", "finish", "authorize", "authorise", "approve",
        "sure", "i m sure", "i understand", "got it", "checkmark", "tick", "positive", "finalize",
        "确定", "确认", "好的", "好", "是", "继续", "下一步", "提交", "完成", "同意", "允许", "授权",
        "確認", "確定", "はい", "続ける", "次へ", "送信する", "完了", "同意する", "許可", "확인", "예", "계속", "다음",
        "aceptar", "confirmar", "si", "continuar", "siguiente", "enviar", "listo", "sim",
        "proximo", "concluir", "confirmer", "oui", "continuer", "suivant", "valider", "accepter", "d accord",
        "bestatigen", "abschliessen", "ja", "weiter", "fortfahren", "absenden", "fertig", "zustimmen", "akzeptieren",
        "conferma", "avanti", "continua", "procedi", "ок", "подтвердит*", "да", "продолжит*", "далее",
        "готово", "принять", "согласен", "تاكيد", "موافق", "نعم", "متابعة", "التالي", "استمرار", "قبول",
        "पुष्टि करें", "पुष्टि", "पूरी करें", "पूरा करें", "ठीक है", "हाँ", "हां", "जारी रखें", "आगे", "स्वीकार करें", "सबमिट",
    ],
    Concept.COMMIT: [
        "confirm", "complete", "submit", "authorize", "authorise", "finalize", "proceed", "proceder",
        "realizar", "efetuar", "effectuer", "durchfuhren", "completar", "выполнит*", "确认", "提交", "確定", "確認",
        "확인", "confirmar", "concluir", "confirmer", "valider", "bestatigen", "abschliessen", "conferma",
        "подтвердит*", "تاكيد", "पुष्टि",
    ],
    Concept.NEGATIVE: [
        "cancel", "no", "not now", "later", "back", "go back", "close", "dismiss", "keep", "skip", "never",
        "don t", "do not", "undo", "deny", "decline", "navigate up", "maybe later", "remind me later", "return", "negative",
        "取消", "返回", "关闭", "暂不", "以后再说", "稍后", "不", "否", "拒绝", "キャンセル", "いいえ", "戻る", "閉じる",
        "後で", "취소", "아니요", "닫기", "cancelar", "no gracias", "volver", "atras", "cerrar", "ahora no",
        "nao", "agora nao", "voltar", "fechar", "annuler", "non", "retour", "plus tard", "fermer", "pas maintenant",
        "abbrechen", "nein", "zuruck", "schliessen", "spater", "nicht jetzt", "annulla", "indietro", "chiudi",
        "отмена", "отменить", "нет", "назад", "закрыть", "не сейчас", "позже", "الغاء", "لا", "رجوع", "اغلاق",
        "ليس الان", "لاحقا", "रद्द करें", "रद्द", "नहीं", "वापस", "बंद करें", "बाद में",
    ],
    Concept.PERMANENT: [
        "permanent*", "forever", "irreversibl*", "cannot be undone", "can t be undone", "can not be undone",
        "can t undo", "cannot undo", "can not undo", "no undo",
        "won t be able to recover", "cannot be recovered", "can t be recovered", "not be recoverable",
        "unrecoverabl*", "for good", "pour toujours", "para sempre", "per sempre", "fur immer", "完全", "will be lost", "永久", "彻底", "无法恢复", "不可恢复", "无法撤销", "不能恢复",
        "无法找回", "完全に", "元に戻せません", "復元できません", "영구", "복구할 수 없", "permanentemente",
        "definitivamente", "para siempre", "no se puede deshacer", "nao pode ser desfeit*", "definitivement",
        "irreversible", "ne peut pas etre annule*", "endgultig", "unwiderruflich", "kann nicht ruckgangig",
        "definitivamente", "non puo essere annullat*", "навсегда", "безвозвратно", "нельзя отменить",
        "невозможно восстановить", "نهائيا", "بشكل دائم", "نهائي", "لا يمكن التراجع", "स्थायी रूप से", "हमेशा के लिए",
        "पूर्ववत नहीं",
    ],
    Concept.BULK: [
        "all", "everything", "entire", "every", "全部", "所有", "全て", "すべて", "모두", "전체", "todo", "todos",
        "todas", "tudo", "tout", "tous", "toutes", "alle", "alles", "tutto", "tutti", "tutte", "все", "всё",
        "всех", "الكل", "جميع", "كل", "सभी", "सब",
    ],
    Concept.ACCOUNT: [
        "account", "profile", "账号", "帐号", "账户", "帐户", "アカウント", "계정", "cuenta", "conta", "compte",
        "konto", "account", "аккаунт*", "учетн*", "профиль", "الحساب", "حساب", "खाता", "अकाउंट",
    ],
    Concept.DATA: [
        "data", "storage", "history", "chats", "messages", "conversations", "library", "backup", "backups",
        "数据", "记录", "历史", "聊天记录", "データ", "履歴", "데이터", "기록", "datos", "historial", "dados",
        "historico", "donnees", "historique", "daten", "verlauf", "dati", "cronologia", "данные", "историю",
        "история", "переписку", "данных", "البيانات", "السجل", "डेटा", "इतिहास",
    ],
    Concept.ACTIVITY_LOG: [
        "watch history", "search history", "searches", "browsing history", "viewing history", "recently viewed",
        "观看记录", "观看历史", "搜索记录", "搜索历史", "浏览记录", "視聴履歴", "検索履歴", "閲覧履歴",
        "historial de reproducciones", "historial de busqueda", "historial de busquedas", "historique de recherche",
        "historique des videos", "wiedergabeverlauf", "suchverlauf", "историю просмотров", "история просмотров",
        "историю поиска", "история поиска", "historico de exibicao", "historico de pesquisa",
        "سجل المشاهدة", "سجل البحث", "देखने का इतिहास", "खोज इतिहास",
    ],
    Concept.DEVICE: [
        "phone", "device", "tablet", "iphone", "ipad", "internal storage", "sd card", "手机", "设备", "端末", "スマートフォン", "휴대전화",
        "기기", "telefono", "dispositivo", "celular", "telephone", "appareil", "telefon", "gerat", "handy",
        "телефон*", "устройств*", "الهاتف", "الجهاز", "फ़ोन", "फोन", "डिवाइस",
    ],
    Concept.FACTORY: ["factory", "出厂", "工場", "공장", "fabrica", "usine", "werks*", "fabbrica", "заводск*",
                      "المصنع", "फ़ैक्टरी", "फैक्टरी"],
    Concept.TRASH: ["trash", "bin", "recycle bin", "recently deleted", "deleted items", "回收站", "最近删除",
                    "ゴミ箱", "最近削除", "휴지통", "papelera", "lixeira", "corbeille", "papierkorb", "cestino",
                    "المهملات", "सलेक्टेड हटाए गए", "रीसायकल बिन", "ट्रैश"],
    Concept.DONE: [
        "successful", "successfully", "success", "succeeded", "completed", "thank you", "thanks for",
        "order placed", "received", "has been received", "recibido", "recebido", "recu", "erhalten",
        "получен*", "已收到", "受け取りました", "تم الاستلام", "प्राप्त हुआ", "has been placed", "has been sent", "was sent", "paid", "receipt",
        "confirmation number", "成功", "已支付", "已完成", "已付款", "完了しました", "ありがとう", "완료되었습니다", "성공", "exito", "exitoso",
        "realizado con exito", "gracias", "sucesso", "obrigado", "reussi", "merci", "erfolgreich", "danke",
        "riuscito", "grazie", "успешно", "спасибо", "نجاح", "بنجاح", "شكرا", "सफल", "सफलतापूर्वक", "धन्यवाद",
    ],
    Concept.LOOKALIKE: [
        "attention", "method", "methods", "option", "options", "history", "histories", "settings", "setting",
        "details", "detail", "records", "record", "list", "order by", "sort by", "sorted by", "sort", "filter", "track", "tracking", "status",
        "view", "manage", "help", "learn", "how", "faq", "policy", "terms", "receipts", "invoices", "statement",
        "add to", "save for later", "wishlist", "compare", "my orders", "my purchases", "my payments",
        "my subscriptions", "info", "information", "reviews", "guide",
        "return", "returns", "refund", "notifications", "수단", "continue shopping", "keep shopping", "seguir comprando",
        "continuar comprando", "continuer mes achats", "continuer vos achats", "weiter einkaufen", "продолжить покупки",
        "متابعة التسوق", "खरीदारी जारी रखें", "쇼핑 계속하기", "继续购物", "買い物を続ける", "continua lo shopping",
        "restore purchases", "restore purchase", "恢复购买", "購入を復元", "restaurar compras", "restaurer les achats",
        "kaufe wiederherstellen", "in app purchases", "in app purchase", "offers in app purchases", "восстановить покупки", "待付款", "待支付", "待收货", "支払い待ち",
        "方式", "记录", "历史", "明细", "详情", "设置", "管理", "帮助", "加入购物车", "排序", "我的", "查看", "说明",
        "方法", "履歴", "設定", "詳細", "カートに入れる", "並べ替え", "내역", "설정", "장바구니 담기",
        "metodo", "metodos", "forma", "formas", "historial", "ajustes", "detalles", "ordenar", "anadir al carrito", "agregar al carrito",
        "historico", "configuracoes", "detalhes", "adicionar ao carrinho", "mis pedidos", "mis compras", "meus pedidos",
        "minhas compras",
        "moyens", "moyen", "historique", "parametres", "details", "trier", "ajouter au panier", "mes commandes",
        "mes achats",
        "zahlungsarten", "zahlungsmethode", "verlauf", "einstellungen", "sortieren", "in den warenkorb",
        "meine bestellungen",
        "metodi", "cronologia", "impostazioni", "aggiungi al carrello", "способы", "способ", "история", "настройки",
        "подробнее", "сортировать", "в корзину", "мои заказы", "мои покупки", "طرق", "طريقة", "سجل", "الاعدادات", "اضف الى السلة",
        "طلباتي", "तरीके", "इतिहास", "सेटिंग्स", "कार्ट में जोड़ें", "मेरे",
    ],
}
