"""Cell centroids of grid codes in EPSG:3035 and in ETRS89 longitude/latitude.

The Lambert azimuthal equal-area projection on the GRS80 ellipsoid, oblique aspect, in closed
form as in IOGP/EPSG Guidance Note 7-2 (method 9820), with the parameters of EPSG:3035
(ETRS89-extended / LAEA Europe): latitude of origin 52° N, longitude of origin 10° E, false
easting 4 321 000 m, false northing 3 210 000 m. numpy only (no pyproj).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from protab.grid._codes import as_code_series, parse_codes

_A = 6378137.0  # GRS80 semi-major axis (m)
_F = 1 / 298.257222101  # GRS80 flattening
_LAT0 = np.radians(52.0)
_LON0 = np.radians(10.0)
_FE = 4321000.0
_FN = 3210000.0

_E2 = 2 * _F - _F * _F
_E = np.sqrt(_E2)


def _q(sinphi: Any) -> Any:
    return (1 - _E2) * (sinphi / (1 - _E2 * sinphi**2) - np.log((1 - _E * sinphi) / (1 + _E * sinphi)) / (2 * _E))


_QP = _q(1.0)
_BETA0 = np.arcsin(_q(np.sin(_LAT0)) / _QP)
_RQ = _A * np.sqrt(_QP / 2)
_D = _A * (np.cos(_LAT0) / np.sqrt(1 - _E2 * np.sin(_LAT0) ** 2)) / (_RQ * np.cos(_BETA0))


def laea_forward(lon: Any, lat: Any) -> tuple[np.ndarray, np.ndarray]:
    """Easting, northing (EPSG:3035, metres) of ETRS89 longitude/latitude in degrees (GN 7-2 §3.3)."""
    lam = np.radians(np.asarray(lon, dtype=float)) - _LON0
    beta = np.arcsin(_q(np.sin(np.radians(np.asarray(lat, dtype=float)))) / _QP)
    b = _RQ * np.sqrt(2 / (1 + np.sin(_BETA0) * np.sin(beta) + np.cos(_BETA0) * np.cos(beta) * np.cos(lam)))
    x = _FE + b * _D * np.cos(beta) * np.sin(lam)
    y = _FN + (b / _D) * (np.cos(_BETA0) * np.sin(beta) - np.sin(_BETA0) * np.cos(beta) * np.cos(lam))
    return x, y


def laea_inverse(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """ETRS89 longitude, latitude (degrees) of EPSG:3035 easting/northing in metres.

    GN 7-2's closed form: ρ, C and the authalic latitude β′, then the latitude by the series
    in e² (terms to e⁶, about 1e-8° off) polished by one Newton step, and the longitude by
    atan2. At the origin itself (ρ = 0) the result is the origin.
    """
    dx = np.asarray(x, dtype=float) - _FE
    dy = np.asarray(y, dtype=float) - _FN
    rho = np.hypot(dx / _D, _D * dy)
    c = 2 * np.arcsin(np.minimum(rho / (2 * _RQ), 1.0))
    safe = np.where(rho > 0, rho, 1.0)
    sin_beta = np.cos(c) * np.sin(_BETA0) + np.where(rho > 0, _D * dy * np.sin(c) * np.cos(_BETA0) / safe, 0.0)
    beta = np.arcsin(np.clip(sin_beta, -1.0, 1.0))
    e4, e6 = _E2 * _E2, _E2 * _E2 * _E2
    phi = (
        beta
        + (_E2 / 3 + 31 * e4 / 180 + 517 * e6 / 5040) * np.sin(2 * beta)
        + (23 * e4 / 360 + 251 * e6 / 3780) * np.sin(4 * beta)
        + (761 * e6 / 45360) * np.sin(6 * beta)
    )
    # One Newton step on q(φ) = qP·sin β′ (Snyder 1987, eq. 3-16) takes the series' ~1e-8°
    # truncation error to rounding level; near the poles (cos φ → 0) the series is kept.
    sp, cp = np.sin(phi), np.cos(phi)
    w = 1 - _E2 * sp * sp
    step = w * w / (2 * np.where(cp > 1e-12, cp, 1.0)) * (
        _QP * np.sin(beta) / (1 - _E2) - sp / w + np.log((1 - _E * sp) / (1 + _E * sp)) / (2 * _E)
    )
    phi = phi + np.where(cp > 1e-12, step, 0.0)
    lam = _LON0 + np.arctan2(
        dx * np.sin(c), _D * rho * np.cos(_BETA0) * np.cos(c) - _D * _D * dy * np.sin(_BETA0) * np.sin(c)
    )
    return np.degrees(lam), np.degrees(phi)


def centroids(codes: Any, *, column: str | None = None) -> pl.DataFrame:
    """Centres of the grid squares: ``code``, ``x``, ``y`` (EPSG:3035 metres, corner + side/2)
    and ``lon``, ``lat`` (ETRS89 degrees, :func:`laea_inverse`), one row per code as given."""
    s = as_code_series(codes, column)
    p = parse_codes(s)
    half = p["resolution"].to_numpy() / 2
    x = p["easting"].to_numpy() + half
    y = p["northing"].to_numpy() + half
    lon, lat = laea_inverse(x, y)
    return pl.DataFrame({s.name: s, "x": x, "y": y, "lon": lon, "lat": lat})
