-- protab demo: a synthetic census-like population and a business register, generated in SQL.
--
--   .read sql/demo_population.sql
--   CREATE TABLE persons AS SELECT * FROM protab_demo_population(1000000);
--   CREATE TABLE firms AS SELECT * FROM protab_demo_firms(80000);
--
-- Deterministic: every random draw is a hash of (an id, a draw number), so the same n gives the
-- same rows on every run and thread count. Draw numbers by kind of id: persons 1-19,
-- households 20-39, towns and villages 40-49, firms 50-63.
--
-- The country is a 240 km x 240 km part of the INSPIRE grid (EPSG:3035), 1 km squares
-- N2600-N2839 x E4200-E4439. It holds 400 municipalities, each with one town whose centre lies
-- on a jittered 12 km lattice; a 1 km square belongs to the municipality whose town centre is
-- nearest, so every square lies in one municipality and every municipality in one of 8 regions
-- (the region seat nearest to its town). Town sizes are skewed (the capital's municipality
-- holds about 5 % of the persons). A household lives in its town (dense, spreading with the town's size), in
-- one of the municipality's six villages, or on a farm anywhere in it; many squares are empty.
-- protab_demo_towns() lists the 400 municipalities (region, municipality, town centre, size
-- rank): the classification of the demo's geography, whether or not a small demo fills it.
--
-- persons (one row per person, households of 1-6 persons living in one square):
--   pid           person identifier (1 ... n)
--   hid           household identifier
--   region        "R1" ... "R8"
--   municipality  region code + 3 digits by size within the region, e.g. "R3017"
--   grid1km       INSPIRE 1 km square, e.g. "1kmN2689E4337"
--   grid10km      its 10 km parent, e.g. "10kmN268E433"
--   age           0 ... 99;  agegroup "00-04" ... "85+"
--   sex           "F" or "M"
--   weight        a survey-like weight around 1
--   income        yearly income (0 below age 16)
--   hsize         household size (persons of the household)
--   tenure        "owner", "tenant" or "social" (of the household)
--   dwelling_type "house" or "flat" (of the household)
--   citizenship   "national", "EU" or "non-EU"
--
-- firms (one row per firm):
--   fid               firm identifier (1 ... n)
--   nace              NACE Rev. 2 section, "A" ... "S" (13 of them)
--   size              size class by employees: "0-9", "10-49", "50-249", "250+"
--   employees         persons employed (skewed: a few large firms)
--   turnover          yearly turnover in 1000 EUR (skewed)
--   region, municipality  where the firm is registered (in proportion to the towns' sizes)
--   enterprise_group  the group the firm belongs to ("G" + 5 digits), or the firm itself
--                     ("F" + its id) when it belongs to none

CREATE OR REPLACE MACRO protab_demo_u(id, k) AS
    -- uniform on (0, 1) from a hash of (id, draw number k)
    (CAST(hash(CAST(id AS BIGINT) * 64 + k) >> 11 AS DOUBLE) + 0.5) / 9007199254740992.0;

CREATE OR REPLACE MACRO protab_demo_z(id, k) AS
    -- standard normal by Box–Muller from two uniforms
    sqrt(-2 * ln(protab_demo_u(id, k))) * cos(2 * pi() * protab_demo_u(id, k + 1));

CREATE OR REPLACE MACRO protab_demo_towns() AS TABLE
-- the 400 municipalities: tile (ti, tj) of the 12 km lattice, town centre (cn, ce) in km,
-- size rank (0: the capital), region and municipality codes
WITH lattice AS (
    SELECT range AS m, CAST(range // 20 AS INTEGER) AS ti, CAST(range % 20 AS INTEGER) AS tj,
           CAST(2600 + range // 20 * 12 + 2 + floor(8 * protab_demo_u(range, 40)) AS INTEGER) AS cn,
           CAST(4200 + range % 20 * 12 + 2 + floor(8 * protab_demo_u(range, 41)) AS INTEGER) AS ce,
           protab_demo_u(range, 42) AS u_rank
    FROM range(400)
),
seats AS (  -- region seats: a jittered 2 x 4 pattern
    SELECT range AS r,
           CAST(2600 + 60 + 120 * (range // 4) + floor(50 * (protab_demo_u(range, 43) - 0.5)) AS INTEGER) AS sn,
           CAST(4200 + 30 + 60 * (range % 4) + floor(30 * (protab_demo_u(range, 44) - 0.5)) AS INTEGER) AS se
    FROM range(8)
),
nearest AS (
    SELECT m, CAST(min(((cn - sn) * (cn - sn) + (ce - se) * (ce - se)) * 8 + r) % 8 AS INTEGER) AS r
    FROM lattice, seats GROUP BY m
),
ranked AS (
    SELECT l.m, l.ti, l.tj, l.cn, l.ce, n.r,
           CAST(row_number() OVER (ORDER BY l.u_rank, l.m) - 1 AS INTEGER) AS rank
    FROM lattice l JOIN nearest n USING (m)
)
SELECT m, ti, tj, cn, ce, rank,
       'R' || CAST(r + 1 AS VARCHAR) AS region,
       'R' || CAST(r + 1 AS VARCHAR)
           || lpad(CAST(row_number() OVER (PARTITION BY r ORDER BY rank) AS VARCHAR), 3, '0') AS municipality
FROM ranked;

CREATE OR REPLACE MACRO protab_demo_population(n) AS TABLE
WITH towns AS (SELECT * FROM protab_demo_towns()),
sized AS (  -- household sizes 1-6: 34, 33, 14, 13, 4, 2 % (mean 2.26); more households than needed
    SELECT range + 1 AS hid,
           CASE WHEN u < 0.34 THEN 1 WHEN u < 0.67 THEN 2 WHEN u < 0.81 THEN 3
                WHEN u < 0.94 THEN 4 WHEN u < 0.98 THEN 5 ELSE 6 END AS size
    FROM (SELECT range, protab_demo_u(range + 1, 20) AS u FROM range(n // 2 + 50))
),
households AS (
    SELECT hid, size, CAST(sum(size) OVER (ORDER BY hid) AS BIGINT) - size + 1 AS first FROM sized
),
settled AS (  -- the town a household belongs to (skewed by size) and its kind of place
    SELECT h.hid, h.first, CAST(least(h.size, n - h.first + 1) AS INTEGER) AS hsize,
           t.m, t.rank, t.ti, t.tj, t.cn, t.ce,
           CASE WHEN protab_demo_u(h.hid, 22) < 0.55 + 0.40 * pow(t.rank + 1, -0.3) THEN 'town'
                WHEN protab_demo_u(h.hid, 23) < 0.7 THEN 'village' ELSE 'farm' END AS place
    FROM households h
    JOIN towns t ON t.rank = CAST(floor(400 * pow(protab_demo_u(h.hid, 21), 2.2)) AS INTEGER)
    WHERE h.first <= n
),
located AS (  -- the household's 1 km square (north, east in km), inside the country
    SELECT s.*,
           CAST(least(2839, greatest(2600, CASE place
               WHEN 'town' THEN floor(cn + (0.45 + 3.5 * pow(rank + 1, -0.6)) * protab_demo_z(hid, 24))
               WHEN 'village' THEN floor(2600 + ti * 12 + 12 * protab_demo_u(m * 8 + v, 45)
                                         + 0.5 * protab_demo_z(hid, 24))
               ELSE 2600 + ti * 12 + floor(12 * protab_demo_u(hid, 24)) END)) AS INTEGER) AS north,
           CAST(least(4439, greatest(4200, CASE place
               WHEN 'town' THEN floor(ce + (0.45 + 3.5 * pow(rank + 1, -0.6)) * protab_demo_z(hid, 26))
               WHEN 'village' THEN floor(4200 + tj * 12 + 12 * protab_demo_u(m * 8 + v, 46)
                                         + 0.5 * protab_demo_z(hid, 26))
               ELSE 4200 + tj * 12 + floor(12 * protab_demo_u(hid, 26)) END)) AS INTEGER) AS east
    FROM (SELECT *, CAST(floor(6 * protab_demo_u(hid, 28)) AS INTEGER) AS v FROM settled) s
),
squares AS (SELECT DISTINCT north, east FROM located),
owner AS (  -- each square's municipality: the nearest town centre among the 3 x 3 nearby tiles
    SELECT q.north, q.east,
           -- 4 x the squared distance from the square's centre, an integer; ties to the lower m
           CAST(min(((2 * (t.cn - q.north) - 1) * (2 * (t.cn - q.north) - 1)
                     + (2 * (t.ce - q.east) - 1) * (2 * (t.ce - q.east) - 1)) * 1024 + t.m) % 1024 AS INTEGER) AS m
    FROM squares q CROSS JOIN range(9) o(k)
    JOIN towns t ON t.ti = (q.north - 2600) // 12 + k // 3 - 1 AND t.tj = (q.east - 4200) // 12 + k % 3 - 1
    GROUP BY q.north, q.east
),
homes AS (  -- household attributes
    SELECT l.hid, l.first, l.hsize, t.region, t.municipality,
           '1kmN' || CAST(l.north AS VARCHAR) || 'E' || CAST(l.east AS VARCHAR) AS grid1km,
           '10kmN' || CAST(l.north // 10 AS VARCHAR) || 'E' || CAST(l.east // 10 AS VARCHAR) AS grid10km,
           -- the first person's age: 27-54 with children (3 or more persons), else 18-64 or,
           -- for one in four, 65-96
           CAST(CASE WHEN l.hsize >= 3 THEN 27 + floor(28 * protab_demo_u(l.hid, 29))
                     WHEN protab_demo_u(l.hid, 35) < 0.75 THEN 18 + floor(47 * protab_demo_u(l.hid, 29))
                     ELSE 65 + floor(32 * pow(protab_demo_u(l.hid, 29), 1.4)) END AS INTEGER) AS age0,
           CASE WHEN protab_demo_u(l.hid, 30) < 0.5 THEN 'F' ELSE 'M' END AS sex0,
           protab_demo_u(l.hid, 31) < 0.85 AS couple,
           CASE WHEN c < f / 2 THEN 'EU' WHEN c < f THEN 'non-EU' ELSE 'national' END AS hcitizenship,
           CASE WHEN o < own THEN 'owner' WHEN o < own + (1 - own) * 0.3 THEN 'social' ELSE 'tenant' END AS tenure,
           CASE WHEN protab_demo_u(l.hid, 34) < flat THEN 'flat' ELSE 'house' END AS dwelling_type
    FROM (SELECT *, protab_demo_u(hid, 32) AS c, protab_demo_u(hid, 33) AS o,
                 CASE place WHEN 'town' THEN 0.06 + 0.10 * pow(rank + 1, -0.3) ELSE 0.03 END AS f,
                 CASE place WHEN 'town' THEN 0.70 - 0.30 * pow(rank + 1, -0.3) WHEN 'village' THEN 0.75
                            ELSE 0.85 END AS own,
                 CASE place WHEN 'town' THEN 0.30 + 0.50 * pow(rank + 1, -0.3) WHEN 'village' THEN 0.10
                            ELSE 0.0 END AS flat
          FROM located) l
    JOIN owner w USING (north, east)
    JOIN towns t ON t.m = w.m
),
members AS (
    SELECT *, unnest(range(hsize)) AS j FROM (SELECT * FROM homes ORDER BY hid)
),
people AS (
    SELECT first + j AS pid, hid, hsize, grid1km, grid10km, region, municipality, tenure, dwelling_type,
           CAST(CASE WHEN j = 0 THEN age0
                     WHEN j = 1 AND couple THEN least(99, greatest(18, age0 + round(3.5 * protab_demo_z(first + j, 1))))
                     -- children: 0-17 for parents of 38 or more, younger for younger parents,
                     -- grown up for parents past 42
                     ELSE floor(protab_demo_u(first + j, 2) * least(greatest(age0 - 20, 1), 18)) + greatest(0, age0 - 42)
                     END AS INTEGER) AS age,
           CASE WHEN j = 0 THEN sex0
                WHEN j = 1 AND couple THEN CASE WHEN (protab_demo_u(first + j, 3) < 0.92) = (sex0 = 'F')
                                                THEN 'M' ELSE 'F' END
                WHEN protab_demo_u(first + j, 3) < 0.49 THEN 'F' ELSE 'M' END AS sex,
           CASE WHEN j > 0 AND protab_demo_u(first + j, 4) < 0.25 THEN 'national' ELSE hcitizenship END AS citizenship
    FROM members
)
SELECT
    pid,
    hid,
    region,
    municipality,
    grid1km,
    grid10km,
    age,
    CASE WHEN age >= 85 THEN '85+'
         ELSE lpad(CAST(age // 5 * 5 AS VARCHAR), 2, '0') || '-'
              || lpad(CAST(age // 5 * 5 + 4 AS VARCHAR), 2, '0') END AS agegroup,
    sex,
    round(0.8 + 0.4 * protab_demo_u(pid, 15), 4) AS weight,
    CASE WHEN age < 16 THEN 0.0
         ELSE round(exp(10.1 + 0.6 * protab_demo_z(pid, 17)), 0) END AS income,
    hsize,
    tenure,
    dwelling_type,
    citizenship
FROM people;

CREATE OR REPLACE MACRO protab_demo_firms(n) AS TABLE
WITH towns AS (SELECT * FROM protab_demo_towns()),
drawn AS (
    SELECT range + 1 AS fid,
           CAST(floor(400 * pow(protab_demo_u(range + 1, 50), 2.6)) AS INTEGER) AS rank,
           protab_demo_u(range + 1, 51) AS u,
           CAST(least(20000, floor(pow(protab_demo_u(range + 1, 52), -0.866))) AS INTEGER) AS employees
    FROM range(n)
),
classed AS (
    SELECT *,
           CASE WHEN employees < 10 THEN '0-9' WHEN employees < 50 THEN '10-49'
                WHEN employees < 250 THEN '50-249' ELSE '250+' END AS size,
           CASE WHEN employees < 10 THEN 0.04 WHEN employees < 50 THEN 0.25
                WHEN employees < 250 THEN 0.55 ELSE 0.85 END AS p_group
    FROM drawn
)
SELECT
    fid,
    CASE WHEN u < 0.06 THEN 'A' WHEN u < 0.14 THEN 'C' WHEN u < 0.27 THEN 'F' WHEN u < 0.47 THEN 'G'
         WHEN u < 0.52 THEN 'H' WHEN u < 0.60 THEN 'I' WHEN u < 0.65 THEN 'J' WHEN u < 0.68 THEN 'K'
         WHEN u < 0.73 THEN 'L' WHEN u < 0.87 THEN 'M' WHEN u < 0.93 THEN 'N' WHEN u < 0.97 THEN 'Q'
         ELSE 'S' END AS nace,
    size,
    employees,
    round(employees * exp(4.6 + 0.9 * protab_demo_z(fid, 53)), 1) AS turnover,
    t.region,
    t.municipality,
    CASE WHEN protab_demo_u(fid, 55) < p_group
         THEN 'G' || lpad(CAST(CAST(floor(greatest(1, n // 40) * pow(protab_demo_u(fid, 56), 1.5)) AS INTEGER) + 1
                               AS VARCHAR), 5, '0')
         ELSE 'F' || CAST(fid AS VARCHAR) END AS enterprise_group
FROM classed c JOIN towns t ON t.rank = c.rank
ORDER BY fid;
