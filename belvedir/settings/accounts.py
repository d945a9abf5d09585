"""Sign-in and accounts: authentication, django-axes lockouts, sign-up rate, email."""

from datetime import timedelta

from belvedir.env import envbool, envint, envrate, envstr
from belvedir.settings.core import BELVEDIR_DEV

# django-axes sees every login first and locks out after repeated failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15, minimum=1))
# An address guessing one account's password is locked out of that account; the account
# itself stays open to its owner elsewhere (a lockout is not a way to deny someone service).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Guessing from many addresses: past this many failures of one account within the cool-off,
# from any addresses, the account is locked against every address it was not signed in to
# from (belvedir/lockout.py): its owner's own addresses stay open.
AXES_HANDLER = "belvedir.lockout.LoginLockoutHandler"
BELVEDIR_ACCOUNT_LOCKOUT_LIMIT = envint("BELVEDIR_ACCOUNT_LOCKOUT_LIMIT", 20, minimum=1)
AXES_USERNAME_CALLABLE = "belvedir.security.login_username"
AXES_LOCKOUT_CALLABLE = "belvedir.security.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Sign-ups per address (DRF rate syntax: N/second|minute|hour|day).
BELVEDIR_SIGNUP_RATE = envrate("BELVEDIR_SIGNUP_RATE", "10/hour")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Email (invitations): the console backend in development prints messages to the server log;
# set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and EMAIL_HOST… to send them.
EMAIL_BACKEND = envstr(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if BELVEDIR_DEV
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "Belvedir <no-reply@belvedir.local>")
# How long an invitation link stays valid.
BELVEDIR_INVITATION_DAYS = envint("BELVEDIR_INVITATION_DAYS", 7, minimum=1)
