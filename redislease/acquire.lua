-- acquire.lua: grant KEYS[1] to ARGV[1] if it is free and no live waiter is
-- queued ahead; refresh it if ARGV[1] holds it; otherwise report the holder
-- and, if ARGV[4] is '1', queue ARGV[1] (or refresh its entry).
-- KEYS: lease (token NUL fence NUL holder), fence counter, queue (zset
-- token -> arrival), queue expiries (zset token -> server ms), queue
-- channels (hash token -> the waiter's store's id, if it listens).
-- ARGV: token, holder, TTL ms, queue flag, max waiters, store id or ''.
-- Returns the fence when granted, else {code, holder, pttl, fence, ahead}
-- with code -1 when the queue was full.
local tok, fence, holder
local lease = redis.call('GET', KEYS[1])
if lease then
  tok, fence, holder = string.match(lease, '^([^%z]*)%z(%d+)%z(.*)$')
  if tok == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return fence
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rank, ahead = nil, 0
if redis.call('EXISTS', KEYS[3]) == 1 then
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
    redis.call('HDEL', KEYS[5], w)
  end
  rank = redis.call('ZRANK', KEYS[3], ARGV[1])
  ahead = rank or redis.call('ZCARD', KEYS[3])
end
if not lease and ahead == 0 then
  if rank then
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZREM', KEYS[4], ARGV[1])
    redis.call('HDEL', KEYS[5], ARGV[1])
  end
  -- The clock term keeps fences growing if Redis lost the counter.
  local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  fence = string.format('%.0f', math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
  redis.call('SET', KEYS[2], fence)
  redis.call('SET', KEYS[1], ARGV[1] .. '\0' .. fence .. '\0' .. ARGV[2], 'PX', ARGV[3])
  return fence
end
local code = 0
if ARGV[4] == '1' and not rank and ahead >= tonumber(ARGV[5]) then
  code = -1
elseif ARGV[4] == '1' then
  if not rank then
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
    redis.call('ZADD', KEYS[3], (tonumber(last) or 0) + 1, ARGV[1])
  end
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
  if ARGV[6] ~= '' then
    redis.call('HSET', KEYS[5], ARGV[1], ARGV[6])
  else
    redis.call('HDEL', KEYS[5], ARGV[1])
  end
  local keep = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2]) - now
  redis.call('PEXPIRE', KEYS[3], keep)
  redis.call('PEXPIRE', KEYS[4], keep)
  redis.call('PEXPIRE', KEYS[5], keep)
end
return {code, holder or '', redis.call('PTTL', KEYS[1]), fence or '0', ahead}
