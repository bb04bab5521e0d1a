"""Synthesised clips for the audio sweeps (docs/definitions.md §10): tone bursts on a short
timeline (numpy), the stand-in for the continuity paper's ESC-50 event mixes."""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass

import numpy as np

RATE = 16_000  # Hz; what Whisper-style audio encoders take
LENGTH_S = 4.0
FADE_S = 0.02  # raised-cosine fade in and out of each burst (no clicks)


@dataclass(frozen=True)
class Burst:
    """A tone burst: pitch, onset and duration in seconds, level in dB below full scale."""

    hz: float
    onset_s: float
    duration_s: float
    level_db: float


def tone(b: Burst) -> np.ndarray:
    """One burst's samples (faded at both ends)."""
    t = np.arange(int(b.duration_s * RATE)) / RATE
    samples = np.sin(2 * np.pi * b.hz * t) * 10 ** (b.level_db / 20)
    fade = min(int(FADE_S * RATE), len(t) // 2)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, fade))
    samples[:fade] *= ramp
    samples[len(t) - fade :] *= ramp[::-1]
    return samples


def mix(bursts: list[Burst], noise_db: float | None = None, seed: int = 0) -> np.ndarray:
    """The bursts summed on one timeline of ``LENGTH_S`` (optionally over white noise)."""
    out = np.zeros(int(LENGTH_S * RATE))
    for b in bursts:
        start = int(b.onset_s * RATE)
        samples = tone(b)[: len(out) - start]
        out[start : start + len(samples)] += samples
    if noise_db is not None:
        out += np.random.default_rng(seed).normal(0, 10 ** (noise_db / 20), len(out))
    return np.clip(out, -1.0, 1.0)


def wav(samples: np.ndarray) -> bytes:
    """16-bit PCM mono WAV bytes at ``RATE``."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((np.round(samples * 32767)).astype("<i2").tobytes())
    return buf.getvalue()
