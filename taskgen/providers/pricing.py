"""What a model call cost, from settings.MODEL_PRICES (USD per million tokens, input and output); 0 when unknown."""
from __future__ import annotations

from decimal import Decimal

from django.conf import settings


def model_cost_usd(model: str, input_tokens: int, output_tokens: int) -> Decimal:
    """USD for these tokens of `model`, to the millionth of a dollar (a self-hosted model is free: not listed)."""
    price_in, price_out = settings.MODEL_PRICES.get(model, (0, 0))
    usd = (Decimal(str(price_in)) * input_tokens + Decimal(str(price_out)) * output_tokens) / 1_000_000
    return usd.quantize(Decimal("0.000001"))
