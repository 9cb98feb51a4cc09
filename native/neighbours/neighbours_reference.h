// The brute-force reference of the neighbour queries and DBSCAN, for the tests: every point against
// every other, serially, in O(n^2), under the contract of neighbours.h, bit for bit:
//
//  - the local origin is 0.5 * (min + max) per axis over all the points; each coordinate is shifted
//    by it first (one double subtraction), and differences are formed between the shifted values;
//  - d2 = dx * dx + dy * dy (+ dz * dz), summed in axis order, never fused (build with
//    -ffp-contract=off); a point is a neighbour when d2 <= r2, r2 = radius * radius computed once;
//  - neighbours are ordered by (d2, input index); distances are sqrt(d2); a mean distance is the sum
//    of the distances in that order divided by the count.
//
// The inputs must be valid (at least one point, finite coordinates, a finite radius >= 0,
// 0 <= k <= kMaxK, eps >= 0, minPoints >= 1); these functions throw InvalidInput otherwise, but do not
// check everything makeNeighbourIndex and its queries do (no maxPairs, no kMaxPoints).
#pragma once

#include "neighbours.h"

namespace gpugeo::neighbours::reference {

// Per point: count and meanDistance of its neighbours (k == 0: every other point with d2 <= r2;
// k > 0: the first k by (d2, index) among those with d2 <= r2, or among all when radius == 0), and
// the nearest other point at any distance (-1 and NaN when there is only one point).
Summary summarize(const Points& points, const Query& query);

// k == 0: every pair a < b with d2 <= r2 (radius 0 gives the pairs of duplicates). k > 0: the union
// of the directed k-nearest relations of summarize(): (a, b) when b is among a's neighbours or a
// among b's, once, with a < b. Sorted by (a, b); distance = sqrt(d2).
Pairs pairs(const Points& points, const Query& query);

// Core: at least minPoints points (itself included) with d2 <= eps * eps. Core points within eps of
// each other are joined (transitively) into clusters; a non-core point with a core point within eps
// is a border point and takes the cluster of its lowest-index core neighbour, or is noise (0) with
// borderPointsAreNoise. Clusters are numbered 1, 2, ... in increasing order of their lowest member
// index (border members included); size[c - 1] counts the members of cluster c.
Clusters dbscan(const Points& points, const DbscanOptions& options);

}  // namespace gpugeo::neighbours::reference
