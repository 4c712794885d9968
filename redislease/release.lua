-- release.lua: free a lease if the caller's token holds it, or hand it to the
-- first live waiter in the key's queue; take the token out of the queue; and
-- announce the key, naming the waiter at the head of the queue.
--
-- KEYS[1] lease: a string, token NUL fence NUL holder (see grant.lua)
-- KEYS[2] queue (zset, arrival order), KEYS[3] queue expiries (zset),
-- KEYS[4] queue details (hash token -> "ttl:store:holder"), KEYS[5] fence
--         counter
--         (same hash tag as KEYS[1], hence the same cluster slot)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] original lease key,
-- ARGV[4] the token followed by a NUL byte
--
-- Returns 1 when released (or handed over), 0 when the token does not hold
-- the key. A waiter that gives up (0: it held nothing) still leaves the
-- queue, and if the key is free the key is published so that the next
-- waiter looks again.
--
-- The announcement is the key, followed by a NUL byte and the token of the
-- next waiter when one is queued (keys never contain NUL), published on the
-- release channel; when the release handed the key to that waiter, it is
-- published on the waiter's store's own channel (the release channel, ':',
-- the store's identifier) only, since no other waiter can take the key. It
-- carries no fence: it only wakes the waiter, whose Acquire finds the key
-- held by its token and returns the fence (acquire.lua).

-- Redis 3.2-4.x need effects replication because TIME is not deterministic;
-- from 5.0 on it is the default and this call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

-- mine: the token holds the key. ARGV[4] is the token followed by a NUL
-- byte; tokens contain no NUL, so a lease that starts with it holds exactly
-- that token. lease is nil when the key is free.
local lease = redis.call('GET', KEYS[1])
local mine = lease and string.sub(lease, 1, #ARGV[4]) == ARGV[4]

-- The common case, kept to the fewest server calls and no closures: the
-- token holds the key and nobody is queued (a granted token has left the
-- queue), so the key alone is announced.
if mine and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end

-- dequeue forgets waiter w.
local function dequeue(w)
  redis.call('ZREM', KEYS[2], w)
  redis.call('ZREM', KEYS[3], w)
  redis.call('HDEL', KEYS[4], w)
end

-- head returns the first live waiter, dropping the expired entries ahead of
-- it (at most 64 per call), and the server clock (TIME's reply).
local function head()
  local t = redis.call('TIME')
  local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _ = 1, 64 do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)
    if not h[1] then
      return nil, t
    end
    if tonumber(redis.call('ZSCORE', KEYS[3], h[1]) or '0') > nowms then
      return h[1], t
    end
    dequeue(h[1])
  end
  return nil, t
end

-- handOff gives the free key to waiter w (its details: ttl, holder) as
-- acquire.lua's grant does (grant.lua: a fence larger than the last and at
-- least the server clock t, the waiter's holder and TTL).
local function handOff(w, ttl, holder, t)
  local fenceKey, grantee, grantTTL = KEYS[5], w, ttl
  --@grant
  dequeue(w)
end

if mine then
  redis.call('DEL', KEYS[1])
  dequeue(ARGV[1])
  local w, t = head()
  local msg = ARGV[3]
  if w then
    msg = msg .. '\0' .. w
    local ttl, sid, holder = string.match(redis.call('HGET', KEYS[4], w) or '', '^(%d+):([^:]+):(.*)$')
    if ttl then
      handOff(w, ttl, holder, t)
      redis.call('PUBLISH', ARGV[2] .. ':' .. sid, msg)
      return 1
    end
  end
  redis.call('PUBLISH', ARGV[2], msg)
  return 1
end
local dequeued = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if dequeued == 1 and not lease then
  local w = head()
  local msg = ARGV[3]
  if w then
    msg = msg .. '\0' .. w
  end
  redis.call('PUBLISH', ARGV[2], msg)
end
return 0
