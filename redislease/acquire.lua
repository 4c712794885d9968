-- acquire.lua: take a lease if it is free and no live waiter is queued ahead
-- of the caller, refresh it if the caller's token already holds it (also when
-- a release handed it to the caller, a queued waiter: the only way such a
-- waiter learns its fence), or report
-- the current holder (queueing the caller, or refreshing its queue entry, if
-- asked to).
--
-- KEYS[1] lease: a string, token NUL fence NUL holder (see grant.lua)
-- KEYS[2] fence counter (plain string, no TTL)
-- KEYS[3] queue: zset of waiting tokens, score = arrival order
-- KEYS[4] queue expiries: zset of the same tokens, score = entry expiry (ms)
-- KEYS[5] queue details: hash token -> "ttl:store:holder" of each waiter, so that
--         a release can hand the key to the first waiter (release.lua)
--         (all five keys share one hash tag, hence one cluster slot)
-- ARGV[1] token, ARGV[2] holder, ARGV[3] TTL in whole milliseconds,
-- ARGV[4] '1' to queue the token when it cannot be granted the key,
-- ARGV[5] the caller's store identifier when that store hears the release
--         channels ('' otherwise): a queued entry then records its TTL, that
--         identifier and its holder (KEYS[5]), and a release may hand the key
--         to it
-- ARGV[6] the most live waiters the queue may hold: a token not yet queued
--         is not queued beyond it
--
-- Returns the fence when the caller holds the lease afterwards (a bare
-- string: a table reply costs the server about a microsecond more), or
-- {0, holder, pttl, fence, ahead} when it does not: held by someone else, or
-- free ('' holder, fence '0') but reserved for the ahead > 0 live waiters
-- queued before the caller (all of them if the caller is not queued). Fences
-- are returned as decimal strings so no float formatting happens on the way
-- out. A token that should have been queued but was not, the queue being
-- full, gets {-1, holder, pttl, fence, ahead}.

-- Redis 3.2-4.x need effects replication because TIME is not deterministic;
-- from 5.0 on it is the default and this call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

local token, ttl = ARGV[1], tonumber(ARGV[3])
local t = nil -- the server clock (TIME's reply), once read

-- The common case, kept to the fewest server calls and no closures: the key
-- is free and nobody is queued, which one EXISTS of both keys tells; the
-- grant at the end follows. Otherwise, the queue decides.
if redis.call('EXISTS', KEYS[1], KEYS[3]) ~= 0 then
  -- cur: the holder's token, fence and holder name, or {} when free.
  local cur = {}
  local lease = redis.call('GET', KEYS[1])
  if lease then
    cur[1], cur[3], cur[2] = string.match(lease, '^([^%z]*)%z(%d+)%z(.*)$')
    cur[1] = cur[1] or lease -- unreadable: still held, by no token of ours
  end

  t = redis.call('TIME')
  local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local nowms = math.floor(nowus / 1000)

  -- Drop the waiters whose entry expired (not refreshed for their TTL).
  local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nowms)
  for _, w in ipairs(expired) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
    redis.call('HDEL', KEYS[5], w)
  end

  -- rank: the caller's place in the queue (nil if not queued); ahead: how
  -- many live waiters are before it.
  local rank = redis.call('ZRANK', KEYS[3], token)
  local ahead = rank
  if not rank then
    ahead = redis.call('ZCARD', KEYS[3])
  end

  -- enqueue appends the caller (arrival = the server clock in
  -- microseconds, but always after the last waiter, should the clock step
  -- back) or refreshes its entry in place, and makes the queue keys outlive
  -- their last entry by nothing, so an abandoned queue vanishes.
  local function enqueue()
    if not rank then
      if ahead >= tonumber(ARGV[6]) then
        return false -- full
      end
      local arrival = nowus
      local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
      if last[2] and tonumber(last[2]) >= arrival then
        arrival = tonumber(last[2]) + 1
      end
      redis.call('ZADD', KEYS[3], string.format('%.0f', arrival), token)
    end
    redis.call('ZADD', KEYS[4], string.format('%.0f', nowms + ttl), token)
    if ARGV[5] ~= '' then
      redis.call('HSET', KEYS[5], token, ARGV[3] .. ':' .. ARGV[5] .. ':' .. ARGV[2])
    else
      redis.call('HDEL', KEYS[5], token) -- its store no longer listens
    end
    local maxexp = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
    local keep = tonumber(maxexp[2]) - nowms
    redis.call('PEXPIRE', KEYS[3], keep)
    redis.call('PEXPIRE', KEYS[4], keep)
    redis.call('PEXPIRE', KEYS[5], keep)
    return true
  end

  if cur[1] then
    if cur[1] == token then
      redis.call('PEXPIRE', KEYS[1], ARGV[3])
      return cur[3] or '0'
    end
    local pttl = redis.call('PTTL', KEYS[1])
    if ARGV[4] == '1' and not enqueue() then
      return {-1, cur[2] or '', pttl, cur[3] or '0', ahead}
    end
    return {0, cur[2] or '', pttl, cur[3] or '0', ahead}
  end

  -- Free, but reserved for the waiters queued ahead.
  if ahead > 0 then
    if ARGV[4] == '1' and not enqueue() then
      return {-1, '', 0, '0', ahead}
    end
    return {0, '', 0, '0', ahead}
  end

  -- Free and the caller is first: it leaves the queue.
  if rank then
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZREM', KEYS[4], token)
    redis.call('HDEL', KEYS[5], token)
  end
end

-- Grant the free key (grant.lua).
if not t then
  t = redis.call('TIME')
end
local fenceKey, grantee, holder, grantTTL = KEYS[2], token, ARGV[2], ARGV[3]
--@grant
return fence
