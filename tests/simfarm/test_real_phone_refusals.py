"""Real-phone mode counts every request only the farm would answer (so a test or benchmark can prove
the console makes none), and the farm answers the ordinary ADB facts teardown reads: `df`, and a
notification shade whose "Clear all" stays on the screen however many notifications there are."""
import re

from simfarm.farm import Farm


def phone_of(real_phone: bool):
    return next(iter(Farm(devices=1, real_phone=real_phone).phones.values()))


def test_farm_only_requests_are_refused_and_counted_in_real_phone_mode():
    phone = phone_of(real_phone=True)
    assert phone.run("content query --uri content://com.sim.shop/search").exit_code != 0
    assert phone.run("am broadcast -a com.sim.ANOMALY --es kind captcha").exit_code == 0   # delivered to nobody
    assert phone.run("settings get global wifi_on").exit_code == 0                          # what any phone answers
    assert phone.run("content query --uri content://settings/global").exit_code == 0
    assert phone.farm_only_count == 2
    assert phone.farm_only_calls == ["content query --uri content://com.sim.shop/search",
                                     "am broadcast -a com.sim.ANOMALY"]
    phone.run_in_normal_mode("content query --uri content://com.sim.shop/search")    # the farm's ground truth
    assert phone.farm_only_count == 2


def test_the_normal_farm_answers_them_and_counts_nothing():
    phone = phone_of(real_phone=False)
    assert phone.run("content query --uri content://com.sim.shop/search").exit_code == 0
    assert phone.farm_only_count == 0 and phone.farm_only_calls == []


def test_df_reports_the_data_partition_and_files_fill_it():
    phone = phone_of(real_phone=True)
    before = phone.run("df /data").stdout.decode()
    assert before.splitlines()[0].split() == ["Filesystem", "1K-blocks", "Used", "Available", "Use%", "Mounted", "on"]
    used = int(re.search(r"\s(\d+)\s+\d+\s+\d+%\s+/data", before).group(1))
    phone.fs.write("/sdcard/Download/big.bin", b"x" * 4 * 1024 * 1024)
    after = phone.run("df /data").stdout.decode()
    assert int(re.search(r"\s(\d+)\s+\d+\s+\d+%\s+/data", after).group(1)) == used + 4096


def test_clear_all_stays_on_the_screen_with_many_notifications():
    phone = phone_of(real_phone=True)
    for n in range(15):
        phone.run(f"cmd notification post -t 'Offer {n}' offer{n} 'Half price'")
    phone.run("cmd statusbar expand-notifications")
    xml = phone.run("uiautomator dump /dev/tty").stdout.decode()
    bounds = re.search(r'text="Clear all"[^>]*bounds="\[\d+,(\d+)\]\[\d+,(\d+)\]"', xml)
    assert bounds and int(bounds.group(2)) <= phone.height, xml[-400:]
