"""`taskgen demo-setup`: make the demo login (printed once) so `make demo` needs no questions answered."""
from __future__ import annotations

import argparse
import secrets

from django.contrib.auth import get_user_model

from taskgen.demo import demo_login_remember

NAME = "demo-setup"
HELP = "Create the demo admin login if it does not exist and print it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--username", default="admin")


def run(options: dict, stdout, stderr) -> int:
    User = get_user_model()
    username = options["username"]
    if User.objects.filter(username=username).exists():
        stdout.write(f"login: {username} (already exists; password unchanged)")
        return 0
    password = secrets.token_urlsafe(9)
    User.objects.create_superuser(username=username, email="", password=password)
    demo_login_remember(username=username, password=password)  # for the banner `make demo` prints at the end
    stdout.write(f"login: {username}  password: {password}  (printed again when the demo is up; change it in the "
                 "admin)")
    return 0
