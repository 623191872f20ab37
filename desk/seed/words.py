# Chinese titles use full-width punctuation on purpose.
# ruff: noqa: RUF001
"""Words for generated tickets: realistic helpdesk titles and bodies in English and Chinese.

Only `desk/seed/demo.py` uses this; it is data, kept apart so the seeding logic stays readable.
Every template is free of tabs, newlines and backslashes, so a title can go into a COPY text
row without escaping (`make_title` checks it).
"""

from __future__ import annotations

import random

PRODUCTS = ("the web app", "the mobile app", "the admin console", "the reports page", "the API")
PRODUCTS_ZH = ("网页版", "手机App", "管理后台", "报表页面", "开放接口")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
FILE_TYPES = ("PDF", "PNG", "XLSX", "CSV", "DOCX")

EN_TITLES = (
    "Cannot log in after password reset",
    "Cannot log in with single sign-on on {product}",
    "Cannot log in on {product}: 'session expired' every time",
    "Invoice #{n} shows the wrong VAT amount",
    "Export to Excel times out on large lists",
    "{product} crashes when uploading a {ext} file",
    "Refund not received for order #{n}",
    "Two-factor code never arrives by SMS",
    "Please add {small} seats to our plan",
    "Dashboard has been very slow since {weekday}",
    "Email notifications end up in spam",
    "How do I change the billing address?",
    "API returns 500 on /v2/orders for order #{n}",
    "Webhook retries flood our endpoint",
    "Scheduled report shows the wrong time zone",
    "Account locked after too many attempts",
    "CSV import skips rows with accented names",
    "Feature request: dark mode for {product}",
    "Charged twice on the card ending {last4}",
    "Search does not find ticket #{n}",
    "Attachment preview is blank for {ext} files",
    "Need an invoice copy for March",
    "User {small} cannot see the shared folder",
    "Password reset link has expired",
    "Data on {product} is an hour behind",
)

ZH_TITLES = (
    "无法登录：一直提示密码错误",
    "{product_zh}无法登录，显示会话已过期",
    "修改密码后无法登录",
    "发票抬头填写错误，需要重新开具",
    "导出Excel一直失败",
    "订单#{n}的退款还没有到账",
    "收不到短信验证码",
    "{product_zh}加载非常慢",
    "如何修改绑定的邮箱？",
    "上传{ext}附件时报错",
    "账号被锁定，请帮忙解锁",
    "报表里的时区显示不对",
    "希望增加批量导入功能",
    "银行卡尾号{last4}被重复扣款",
    "数据同步延迟超过一小时",
    "搜索不到工单#{n}",
    "新同事需要开通{small}个账号",
    "{product_zh}页面打不开",
)

# Optional tails that make titles as varied as real ones (search and its index see real spread).
EN_TAILS = (
    " since {weekday}",
    " for order #{n}",
    " at our {city} office",
    " (customer {company})",
    " - reported by {small} users",
    " after the {month} update",
)
ZH_TAILS = (
    "（{city}分公司）",
    "，订单号{n}",
    "，影响{small}个用户",
    "（客户：{company}）",
    "，从{month}开始",
)
CITIES = ("Shanghai", "Beijing", "Shenzhen", "Berlin", "London", "Austin", "Taipei", "Singapore")
CITIES_ZH = ("上海", "北京", "深圳", "杭州", "成都", "广州")
COMPANIES = ("Initech", "Hooli", "Umbrella", "Stark", "Wonka", "Tyrell", "Soylent", "Cyberdyne")
MONTHS = ("January", "March", "May", "July", "September", "November")
MONTHS_ZH = ("一月", "三月", "五月", "七月", "九月", "十一月")

BODIES = (
    "Steps to reproduce are in the attached screenshot.",
    "This started this morning and affects the whole team.",
    "We tried clearing the browser cache; no change.",
    "Happens only for some users, not all of them.",
    "Please call me back when you can.",
    "从昨天开始出现，清除缓存后仍然存在。",
    "截图已附上，请尽快处理。",
    "只有部分同事遇到这个问题。",
    "",
)


def make_title(rng: random.Random, *, chinese_share: float = 0.35) -> str:
    """One realistic title; about `chinese_share` of them in Chinese, half with a tail."""
    chinese = rng.random() < chinese_share
    template = rng.choice(ZH_TITLES if chinese else EN_TITLES)
    if rng.random() < 0.5:
        template += rng.choice(ZH_TAILS if chinese else EN_TAILS)
    title = template.format(
        product=rng.choice(PRODUCTS),
        product_zh=rng.choice(PRODUCTS_ZH),
        weekday=rng.choice(WEEKDAYS),
        ext=rng.choice(FILE_TYPES),
        n=rng.randint(10_000, 99_999),
        small=rng.randint(2, 40),
        last4=f"{rng.randint(0, 9999):04d}",
        city=rng.choice(CITIES_ZH if chinese else CITIES),
        company=rng.choice(COMPANIES),
        month=rng.choice(MONTHS_ZH if chinese else MONTHS),
    )
    if any(c in title for c in "\t\n\r\\"):
        raise AssertionError(f"title template would need COPY escaping: {title!r}")
    return title[:1].upper() + title[1:]


def make_body(rng: random.Random) -> str:
    return rng.choice(BODIES)
