-- acquire.lua: take a lease if it is free, refresh it if the caller's token
-- already holds it, or report the current holder.
--
-- KEYS[1] lease hash (fields token, holder, fence)
-- KEYS[2] fence counter (plain string, no TTL; same hash slot as KEYS[1])
-- ARGV[1] token, ARGV[2] holder, ARGV[3] TTL in whole milliseconds
--
-- Returns {1, fence} when the caller holds the lease afterwards, or
-- {0, holder, pttl, fence} when someone else holds it. Fences are returned
-- as decimal strings so no float formatting happens on the way out.

-- Redis 3.2-4.x need effects replication because TIME is not deterministic;
-- from 5.0 on it is the default and this call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

local cur = redis.call('HMGET', KEYS[1], 'token', 'holder', 'fence')
if cur[1] then
  if cur[1] == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, cur[3] or '0'}
  end
  return {0, cur[2] or '', redis.call('PTTL', KEYS[1]), cur[3] or '0'}
end

-- Free. The new fence is larger than the last one granted for this key and
-- at least the server's clock in microseconds, so it keeps growing even when
-- the counter was lost (a restart without persistence, a failover).
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fence = last + 1
if now > fence then
  fence = now
end
fence = string.format('%.0f', fence)

redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'holder', ARGV[2], 'fence', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, fence}
