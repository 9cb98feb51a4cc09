#!/usr/bin/python3
"""The reference cities of the time zones in tzdata (zone1970.tab, in every Debian system) as a
GeoJSON point layer in EPSG:4326: a real, world-wide point set with no download.

usage: tz_cities.py /usr/share/zoneinfo/zone1970.tab OUTPUT.geojson
"""
import json
import re
import sys


def iso6709(text):
    """'+4230+00131' or '+513030-0000731' -> (longitude, latitude) in degrees."""
    match = re.fullmatch(r"([+-])(\d{2})(\d{2})(\d{2})?([+-])(\d{3})(\d{2})(\d{2})?", text)
    if not match:
        raise ValueError(f"not an ISO 6709 coordinate: {text}")
    lat_sign, lat_d, lat_m, lat_s, lon_sign, lon_d, lon_m, lon_s = match.groups()
    latitude = int(lat_d) + int(lat_m) / 60 + int(lat_s or 0) / 3600
    longitude = int(lon_d) + int(lon_m) / 60 + int(lon_s or 0) / 3600
    return (-longitude if lon_sign == "-" else longitude), (-latitude if lat_sign == "-" else latitude)


def main():
    features = []
    with open(sys.argv[1], encoding="utf-8") as table:
        for line in table:
            if line.startswith("#") or not line.strip():
                continue
            columns = line.rstrip("\n").split("\t")
            longitude, latitude = iso6709(columns[1])
            features.append({"type": "Feature",
                             "properties": {"zone_id": len(features) + 1, "tz": columns[2],
                                            "city": columns[2].split("/")[-1].replace("_", " "),
                                            "countries": columns[0]},
                             "geometry": {"type": "Point", "coordinates": [longitude, latitude]}})
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump({"type": "FeatureCollection", "features": features}, out)
    print(f"{len(features)} time-zone cities -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
